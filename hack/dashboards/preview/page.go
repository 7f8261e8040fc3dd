package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// dashboard is the part of Grafana's dashboard JSON the preview draws.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			IncludeAll bool   `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type        string                   `json:"type"`
		Title       string                   `json:"title"`
		Description string                   `json:"description"`
		GridPos     struct{ X, Y, W, H int } `json:"gridPos"`
		FieldConfig struct {
			Defaults struct {
				Unit       string   `json:"unit"`
				Min        *float64 `json:"min"`
				Thresholds *struct {
					Steps []struct {
						Value *float64 `json:"value"`
					} `json:"steps"`
				} `json:"thresholds"`
			} `json:"defaults"`
			Overrides []struct {
				Matcher struct {
					Options string `json:"options"`
				} `json:"matcher"`
				Properties []struct {
					ID    string `json:"id"`
					Value any    `json:"value"`
				} `json:"properties"`
			} `json:"overrides"`
		} `json:"fieldConfig"`
		Targets []struct {
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(path string) (dashboard, error) {
	var d dashboard
	raw, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// page is what the preview page draws: the JSON the script reads.
type page struct {
	Title     string   `json:"title"`
	Source    string   `json:"source"`
	Width     int      `json:"width"`
	Start     int64    `json:"start"`
	End       int64    `json:"end"`
	Step      float64  `json:"step"`
	RateIv    string   `json:"rateInterval"`
	Variables []string `json:"variables"`
	Times     []int64  `json:"times"`
	Panels    []panel  `json:"panels"`
}

type panel struct {
	Type        string    `json:"type"`
	Title       string    `json:"title"`
	Description string    `json:"description"`
	X           int       `json:"x"`
	Y           int       `json:"y"`
	W           int       `json:"w"`
	H           int       `json:"h"`
	Unit        string    `json:"unit"`
	Min         *float64  `json:"min,omitempty"`
	Thresholds  []float64 `json:"thresholds,omitempty"`
	Right       *right    `json:"right,omitempty"`
	Series      []series  `json:"series"`
}

// right is a series drawn on the right axis in its own unit (a byName override).
type right struct {
	Name string   `json:"name"`
	Unit string   `json:"unit"`
	Max  *float64 `json:"max,omitempty"`
}

type series struct {
	Name   string     `json:"name"`
	Values []*float64 `json:"values"`
}

// headerRows is the page header's height in grid rows; rowHeight a grid row in pixels.
const (
	headerRows = 3
	rowHeight  = 30
)

func (p page) height() int {
	bottom := 0
	for _, pn := range p.Panels {
		bottom = max(bottom, pn.Y+pn.H)
	}
	return (headerRows+bottom)*rowHeight + 16
}

func (p page) panelCount() int {
	n := 0
	for _, pn := range p.Panels {
		if pn.Type != "row" {
			n++
		}
	}
	return n
}

func (p page) empty() int {
	n := 0
	for _, pn := range p.Panels {
		if pn.Type != "row" && len(pn.Series) == 0 {
			n++
		}
	}
	return n
}

// fill runs every panel's queries with the variables substituted.
func fill(ctx context.Context, prom *promClient, d dashboard, tr timeRange) (page, error) {
	p := page{Title: d.Title, Start: tr.start.Unix(), End: tr.end.Unix(), Step: tr.step.Seconds(), RateIv: tr.rateIv.String()}
	for t := tr.start.Unix(); t <= tr.end.Unix(); t += int64(tr.step.Seconds()) {
		p.Times = append(p.Times, t)
	}
	vars := map[string]string{"$__rate_interval": promDuration(tr.rateIv)}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		values, err := prom.labelValues(ctx, strings.NewReplacer(varPairs(vars)...).Replace(q), tr)
		if err != nil {
			return p, err
		}
		switch {
		case v.IncludeAll && len(values) > 0:
			// Grafana's All without a custom value: the listed values, regex-escaped, as (a|b).
			quoted := make([]string, len(values))
			for i, val := range values {
				quoted[i] = regexp.QuoteMeta(val)
			}
			vars["$"+v.Name] = "(" + strings.Join(quoted, "|") + ")"
			p.Variables = append(p.Variables, v.Name+" = All ("+strings.Join(values, ", ")+")")
		case len(values) > 0:
			vars["$"+v.Name] = values[0]
			p.Variables = append(p.Variables, v.Name+" = "+values[0])
		default:
			vars["$"+v.Name] = ""
			p.Variables = append(p.Variables, v.Name+" = (none)")
		}
	}
	replace := strings.NewReplacer(varPairs(vars)...).Replace
	for _, dp := range d.Panels {
		pn := panel{Type: dp.Type, Title: dp.Title, Description: dp.Description, X: dp.GridPos.X, Y: dp.GridPos.Y,
			W: dp.GridPos.W, H: dp.GridPos.H, Unit: dp.FieldConfig.Defaults.Unit, Min: dp.FieldConfig.Defaults.Min, Series: []series{}}
		if th := dp.FieldConfig.Defaults.Thresholds; th != nil {
			for _, s := range th.Steps {
				if s.Value != nil {
					pn.Thresholds = append(pn.Thresholds, *s.Value)
				}
			}
		}
		for _, o := range dp.FieldConfig.Overrides {
			r := &right{Name: o.Matcher.Options}
			for _, prop := range o.Properties {
				switch prop.ID {
				case "unit":
					r.Unit, _ = prop.Value.(string)
				case "max":
					if f, ok := prop.Value.(float64); ok {
						r.Max = &f
					}
				}
			}
			pn.Right = r
		}
		for _, t := range dp.Targets {
			result, err := prom.queryRange(ctx, replace(t.Expr), tr)
			if err != nil {
				return p, fmt.Errorf("panel %q: %w", dp.Title, err)
			}
			for _, s := range result {
				pn.Series = append(pn.Series, align(legend(t.LegendFormat, s.Metric), s, p.Times))
			}
		}
		p.Panels = append(p.Panels, pn)
	}
	return p, nil
}

func varPairs(vars map[string]string) []string {
	// Longer names first, so that $job never replaces the start of a $jobs.
	var pairs []string
	for _, name := range []string{"$__rate_interval", "$namespace", "$job"} {
		if v, ok := vars[name]; ok {
			pairs = append(pairs, name, v)
		}
	}
	for name, v := range vars {
		if name != "$__rate_interval" && name != "$namespace" && name != "$job" {
			pairs = append(pairs, name, v)
		}
	}
	return pairs
}

// promDuration writes d as a PromQL duration (whole seconds).
func promDuration(d time.Duration) string {
	return strconv.Itoa(int(math.Round(d.Seconds()))) + "s"
}

// align puts a series' samples on the page's time grid, nil where it has none.
func align(name string, s promSeries, times []int64) series {
	out := series{Name: name, Values: make([]*float64, len(times))}
	index := make(map[int64]int, len(times))
	for i, t := range times {
		index[t] = i
	}
	for _, v := range s.Values {
		ts, _ := v[0].(float64)
		str, _ := v[1].(string)
		f, err := strconv.ParseFloat(str, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if i, ok := index[int64(math.Round(ts))]; ok {
			out.Values[i] = &f
		}
	}
	return out
}

//go:embed page.html
var pageTemplate string

//go:embed page.js
var pageScript string

type assets struct{ uplotJS, uplotCSS string }

func loadAssets(dir string) (assets, error) {
	js, err := os.ReadFile(filepath.Join(dir, "uPlot.iife.min.js"))
	if err != nil {
		return assets{}, fmt.Errorf("uPlot (npm install uplot): %w", err)
	}
	css, err := os.ReadFile(filepath.Join(dir, "uPlot.min.css"))
	if err != nil {
		return assets{}, fmt.Errorf("uPlot: %w", err)
	}
	return assets{uplotJS: string(js), uplotCSS: string(css)}, nil
}

var tmpl = template.Must(template.New("page").Parse(pageTemplate))

func writePage(path string, p page, a assets) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = tmpl.Execute(f, map[string]any{
		"Title":    p.Title,
		"UPlotCSS": template.CSS(a.uplotCSS),
		// The library, the data and the script are ours or npm's uPlot, not user input.
		"UPlotJS": template.JS(a.uplotJS),
		"Data":    template.JS(data),
		"Script":  template.JS(pageScript),
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
