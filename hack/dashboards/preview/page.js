// Draws the dashboard in window.PREVIEW: rows and time-series panels at their gridPos (24 columns,
// 30 px a grid row, as Grafana lays them out), each with uPlot, the library Grafana's own
// time-series panel uses.
(function () {
  const D = window.PREVIEW;
  const ROW = 30, GAP = 6, HEADER = 3 * ROW;
  const board = document.getElementById("board");
  const width = D.width - 16;
  const col = width / 24;
  const palette = ["#56a64b", "#f2a600", "#3274d9", "#e02f44", "#8f3bb8", "#37a3a3", "#ff780a", "#7d8791", "#a352cc", "#96d98d", "#ffb357", "#8ab8ff"];

  // Axis steps for bytes: 1, 2, 4, ... 512 of each binary unit.
  const binaryIncrs = [];
  for (let e = 0; e < 50; e++) binaryIncrs.push(2 ** e);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function sig(v, digits) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    const d = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : Math.max(2, digits - 1 - Math.floor(Math.log10(a)));
    return String(+v.toFixed(Math.min(d, 6)));
  }
  function short(v) {
    const a = Math.abs(v);
    if (a >= 1e9) return sig(v / 1e9, 3) + " G";
    if (a >= 1e6) return sig(v / 1e6, 3) + " M";
    if (a >= 1e3) return sig(v / 1e3, 3) + " k";
    return sig(v, 3);
  }
  function fmt(unit, v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    const a = Math.abs(v);
    switch (unit) {
      case "s":
        if (a === 0) return "0 s";
        if (a < 1e-3) return sig(v * 1e6, 3) + " µs";
        if (a < 1) return sig(v * 1e3, 3) + " ms";
        if (a < 120) return sig(v, 3) + " s";
        if (a < 7200) return sig(v / 60, 3) + " min";
        return sig(v / 3600, 3) + " h";
      case "reqps": return short(v) + " req/s";
      case "ops": return short(v) + " ops/s";
      case "percentunit": return sig(v * 100, 3) + "%";
      case "bytes": {
        const units = ["B", "KiB", "MiB", "GiB", "TiB"];
        let i = 0, x = v;
        while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
        return sig(x, 3) + " " + units[i];
      }
      default: return short(v);
    }
  }

  const header = el("div", "header");
  const h1 = el("h1");
  h1.append(el("span", "", D.title), el("span", "badge", "Preview"));
  header.append(h1);
  const utc = (t) => new Date(t * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  header.append(el("div", "meta", "Not Grafana: " + D.source + " drawn by its gridPos with uPlot, data from a Prometheus scraping the running services under load (make dashboards-preview)."));
  header.append(el("div", "meta", utc(D.start) + " – " + utc(D.end) + " · step " + D.step + " s · $__rate_interval = " + D.rateInterval + " · " + D.variables.join(" · ")));
  board.append(header);
  board.style.height = (HEADER + Math.max(...D.panels.map((p) => p.y + p.h)) * ROW) + "px";

  for (const p of D.panels) {
    const left = p.x * col, top = HEADER + p.y * ROW;
    if (p.type === "row") {
      const r = el("div", "row", p.title);
      Object.assign(r.style, { left: left + "px", top: top + "px", width: p.w * col - GAP + "px", height: ROW - 2 + "px" });
      board.append(r);
      continue;
    }
    const box = el("div", "panel");
    Object.assign(box.style, { left: left + "px", top: top + "px", width: p.w * col - GAP + "px", height: p.h * ROW - GAP + "px" });
    const title = el("div", "ptitle", p.title);
    if (p.description.includes("Empty when healthy")) title.append(el("span", "zero", "0 when healthy"));
    title.title = p.description;
    const plot = el("div", "plot");
    const legend = el("div", "legend");
    box.append(title, plot, legend);
    board.append(box);
    if (p.series.length === 0) {
      plot.append(el("div", "nodata", "No data"));
      continue;
    }
    const unitOf = (s) => (p.right && s.name === p.right.name ? p.right.unit : p.unit);
    // Series that stay at 0 over the whole range (a closed label set initialised at start) share
    // one legend line, so that the legend never crowds out the plot.
    const zeros = [];
    p.series.forEach((s, i) => {
      if (p.series.length > 4 && s.values.every((v) => v === null || v === 0)) {
        zeros.push(s.name || "value");
        return;
      }
      const item = el("span");
      const sw = el("span", "sw");
      sw.style.background = palette[i % palette.length];
      const last = [...s.values].reverse().find((v) => v !== null);
      const peak = Math.max(...s.values.filter((v) => v !== null));
      item.append(sw, document.createTextNode(s.name || "value"), el("span", "v", "last " + fmt(unitOf(s), last) + ", max " + fmt(unitOf(s), peak)));
      legend.append(item);
    });
    if (zeros.length) {
      const z = el("span", "zeros", zeros.length + " more at 0: " + zeros.join(", "));
      z.title = zeros.join(", ");
      legend.append(z);
    }
    const hasRight = p.right && p.series.some((s) => s.name === p.right.name);
    const range = (u, min, max) => {
      const lo = p.min != null ? p.min : Math.min(0, min ?? 0);
      const hi = max === null || max === undefined || max <= lo ? lo + 1 : max + (max - lo) * 0.08;
      return [lo, hi];
    };
    const opts = {
      width: plot.clientWidth,
      height: plot.clientHeight,
      legend: { show: false },
      cursor: { show: false },
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
      scales: { x: { time: true }, y: { range }, r: { range: (u, min, max) => [0, p.right && p.right.max != null ? p.right.max : range(u, min, max)[1]] } },
      axes: [
        { stroke: "#5a6069", grid: { stroke: "#eceef0", width: 1 }, ticks: { stroke: "#d8d9da", width: 1 }, font: "11px DejaVu Sans", size: 24,
          space: 44, incrs: [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400],
          values: (u, splits) => splits.map((t) => new Date(t * 1000).toISOString().slice(11, 16)) },
        { stroke: "#5a6069", grid: { stroke: "#eceef0", width: 1 }, ticks: { show: false }, font: "11px DejaVu Sans", size: 64,
          values: (u, splits) => splits.map((v) => fmt(p.unit, v)), incrs: p.unit === "bytes" ? binaryIncrs : undefined },
      ],
      series: [{}],
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          for (const t of p.thresholds || []) {
            const y = u.valToPos(t, "y", true);
            if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) continue;
            ctx.save();
            ctx.strokeStyle = "#e02f44";
            ctx.setLineDash([6, 4]);
            ctx.lineWidth = 1.5;
            ctx.beginPath();
            ctx.moveTo(u.bbox.left, y);
            ctx.lineTo(u.bbox.left + u.bbox.width, y);
            ctx.stroke();
            ctx.restore();
          }
        }],
      },
    };
    if (hasRight) {
      opts.axes.push({ scale: "r", side: 1, stroke: "#5a6069", grid: { show: false }, ticks: { show: false }, font: "11px DejaVu Sans", size: 56,
        values: (u, splits) => splits.map((v) => fmt(p.right.unit, v)) });
    }
    p.series.forEach((s, i) => {
      const c = palette[i % palette.length];
      // A fill under one line reads as its area; under several it muddies them.
      opts.series.push({ label: s.name, stroke: c, width: 1.5, fill: p.series.length === 1 ? c + "1a" : undefined, points: { show: false }, spanGaps: false,
        scale: hasRight && s.name === p.right.name ? "r" : "y" });
    });
    new uPlot(opts, [D.times, ...p.series.map((s) => s.values)], plot);
  }
})();
