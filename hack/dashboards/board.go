package main

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// EmptyWhenHealthy ends the description of a panel whose metrics legitimately have no series
// while all is well (nothing dead-lettered, nothing deferred, ...). Its queries end in
// `or on() vector(0)`, so that it shows a defined 0; the live monitoring test expects data from
// every other panel. hack/test/docscheck holds both rules.
const EmptyWhenHealthy = "Empty when healthy: shows 0."

// board is one dashboard: its identity, the metric its job variable lists jobs by, its rows.
type board struct {
	uid, title, description string
	// jobsBy is a series selector whose series carry the job label of every service this
	// dashboard shows; the job variable lists its values.
	jobsBy string
	links  []string // uids of the dashboards linked from this one
	rows   []row
}

type row struct {
	title  string
	panels []panel
}

// panel is a time-series panel. width is in grid columns (of 24); zero means 8.
type panel struct {
	title, description, unit string
	width                    uint32
	queries                  []query
	emptyWhenHealthy         bool
	threshold                float64  // a red line at this value when above zero
	min                      *float64 // the axis minimum; nil: from the data
	rightAxis                *override
}

// override moves the series of one legend to the right axis in its own unit.
type override struct {
	legend, unit string
	max          float64
}

type query struct{ expr, legend string }

// sel is the matcher every query carries: the dashboard's namespace and job variables.
const sel = `namespace="$namespace", job=~"$job"`

// m is a metric with the dashboard selector and extra matchers.
func m(name string, matchers ...string) string {
	return name + "{" + strings.Join(append([]string{sel}, matchers...), ", ") + "}"
}

// rate is the per-second rate of a counter over $__rate_interval.
func rate(series string) string { return "rate(" + series + "[$__rate_interval])" }

// quantile is the q-quantile of a histogram, aggregated by le and the extra labels.
func quantile(q float64, histogram string, by ...string) string {
	return fmt.Sprintf("histogram_quantile(%g, sum by (%s) (%s))", q,
		strings.Join(append([]string{"le"}, by...), ", "), rate(m(histogram+"_bucket")))
}

// orZero makes an expression that may have no series return 0 instead.
func orZero(expr string) string { return expr + " or on() vector(0)" }

var datasource = common.DataSourceRef{Type: new("prometheus"), Uid: new("${datasource}")}

// build uses the classic dashboard model (schema v1), which the SDK marks deprecated in favour
// of v2: the Grafana sidecar and file provisioning that load the chart's ConfigMaps read v1 JSON,
// and v2 needs Grafana 12's dashboard API.
//
//nolint:staticcheck // the v1 model on purpose, see above
func (b board) build() (dashboard.Dashboard, error) {
	db := dashboard.NewDashboardBuilder(b.title).
		Uid(b.uid).
		Description(b.description).
		Tags([]string{"boardreadyops"}).
		Readonly().
		Timezone("utc").
		Time("now-6h", "now").
		Refresh("30s").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("namespace").Label("Namespace").
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: new(fmt.Sprintf("label_values(%s, namespace)", b.jobsBy))}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)).
		WithVariable(dashboard.NewQueryVariableBuilder("job").Label("Job").
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: new(fmt.Sprintf("label_values(%s, job)", withNamespace(b.jobsBy)))}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
			// All is the listed jobs (Grafana's default), not .+: that would match every job in the
			// namespace on a service's dashboard.
			Multi(true).IncludeAll(true))
	for _, uid := range b.links {
		db.Link(dashboard.NewDashboardLinkBuilder(titles[uid]).
			Type(dashboard.DashboardLinkTypeLink).
			Url("/d/" + uid).
			Tooltip(titles[uid]).
			Icon("dashboard").
			IncludeVars(true).
			KeepTime(true))
	}
	// An expanded row's panels follow it in the dashboard's panel list (Grafana reads panels
	// nested in a row only when the row is collapsed).
	id := uint32(0)
	for _, r := range b.rows {
		id++
		db.WithRow(dashboard.NewRowBuilder(r.title).Id(id).Collapsed(false))
		for _, p := range r.panels {
			id++
			db.WithPanel(p.builder(id))
		}
	}
	return db.Build()
}

// withNamespace adds the namespace matcher to a selector.
func withNamespace(selector string) string {
	if i := strings.LastIndex(selector, "}"); i >= 0 {
		return selector[:i] + `, namespace="$namespace"}`
	}
	return selector + `{namespace="$namespace"}`
}

func (p panel) builder(id uint32) *timeseries.PanelBuilder {
	desc := p.description
	if p.emptyWhenHealthy {
		desc += " " + EmptyWhenHealthy
	}
	w := p.width
	if w == 0 {
		w = 8
	}
	pb := timeseries.NewPanelBuilder().
		Id(id).
		Title(p.title).
		Description(desc).
		Datasource(datasource).
		Unit(p.unit).
		Span(w).
		Height(8).
		FillOpacity(10).
		LineWidth(1).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	if p.threshold > 0 {
		pb.Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).
			Steps([]dashboard.Threshold{{Color: "green"}, {Color: "red", Value: new(p.threshold)}})).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine))
	}
	if p.min != nil {
		pb.Min(*p.min)
	}
	if o := p.rightAxis; o != nil {
		pb.OverrideByName(o.legend, []dashboard.DynamicConfigValue{
			{Id: "unit", Value: o.unit},
			{Id: "custom.axisPlacement", Value: "right"},
			{Id: "max", Value: o.max},
		})
	}
	for i, q := range p.queries {
		expr := q.expr
		if p.emptyWhenHealthy {
			expr = orZero(expr)
		}
		pb.WithTarget(prometheus.NewDataqueryBuilder().
			RefId(string(rune('A' + i))).
			Expr(expr).
			LegendFormat(q.legend).
			Range())
	}
	return pb
}
