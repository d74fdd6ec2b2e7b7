// Interactive time-series charts: each figure.ichart fetches its data-src
// (JSON from /ui/data/trend, same origin, the session cookie
// authenticates) and draws it with uPlot (vendored, static/vendor/uplot).
// Every signal has its own y axis and unit; the legend shows the values
// under the cursor with their units; drag or the wheel zooms, shift+wheel
// and the buttons pan, double-click or "Reset" shows everything; with the
// chart focused the keys + − ← → 0 do the same. The x axis is either the
// absolute time in UTC or the minutes since each run's start (runs
// overlay); on the latter, golden-run bands (mean ± k·σ over runs the
// user chose as good) are filled between their high and low lines. The server-drawn SVG inside the figure stays when there is no
// script or no data. No framework, no external code.
(function () {
  "use strict";
  if (!window.uPlot || !window.fetch) { return; }
  var palette = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#7f7f00", "#000000"];
  var dashes = [null, [8, 4], [2, 3], [10, 3, 2, 3]];
  var dashNames = ["solid", "dashed", "dotted", "dash-dot"];

  function fmt(v) {
    if (v == null || !isFinite(v)) { return "–"; }
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) { return v.toExponential(3); }
    return String(+v.toPrecision(5));
  }
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function utc(sec) {
    var d = new Date(sec * 1000);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + "Z";
  }
  function withUnit(v, unit) { return v == null ? "–" : fmt(v) + (unit ? " " + unit : ""); }

  function draw(fig, plotEl, doc) {
    var abs = doc.align === "time";
    var status = fig.querySelector(".ichart-status");
    var tables = doc.series.filter(function (s) { return s.x.length > 0; }).map(function (s) { return [s.x, s.y]; });
    var shown = doc.series.filter(function (s) { return s.x.length > 0; });
    // Golden-run bands: hi, lo (filled between) and the mean, per node.
    var bands = (doc.bands || []).filter(function (b) { return b.x.length > 0; });
    bands.forEach(function (b) { tables.push([b.x, b.hi], [b.x, b.lo], [b.x, b.mean]); });
    if (!tables.length) {
      fig.setAttribute("data-state", "empty");
      status.textContent = "No samples for the chosen signals and runs.";
      return null;
    }
    var data = uPlot.join(tables);
    var nodeIdx = {}, nodes = {};
    doc.nodes.forEach(function (n, i) { nodeIdx[n.id] = i; nodes[n.id] = n; });
    var scales = { x: { time: abs } };
    var xLabel = abs ? "time (UTC)" : "time since run start [min]";
    // Absolute ticks in UTC, 24 h, the date under the first tick of each day.
    var utcTicks = function (u, vals) {
      var prev = "", secs = u.scales.x.max - u.scales.x.min < 600;
      return vals.map(function (v) {
        var s = utc(v), d = s.slice(0, 10), t = secs ? s.slice(11, 19) : s.slice(11, 16);
        var out = d !== prev ? t + "\n" + d : t;
        prev = d;
        return out;
      });
    };
    var axes = [{ label: xLabel, size: abs ? 56 : 40, values: abs ? utcTicks : function (u, vals) { return vals.map(fmt); } }];
    var used = {};
    shown.forEach(function (s) { used[s.node] = true; });
    bands.forEach(function (b) { used[b.node] = true; });
    var byRun = {};
    shown.forEach(function (s) { byRun[s.run] = true; });
    var manyRuns = Object.keys(byRun).length > 1;
    var k = 0;
    doc.nodes.forEach(function (n, ni) {
      if (!used[n.id]) { return; }
      scales[n.id] = { auto: true };
      axes.push({
        scale: n.id, side: k % 2 ? 1 : 3, grid: { show: k === 0 }, size: 64,
        // Several runs: colour is the run, the line style the signal.
        label: n.id + (n.unit ? " [" + n.unit + "]" : "") + (manyRuns && doc.nodes.length > 1 ? " (" + dashNames[ni % dashNames.length] + ")" : ""),
        stroke: doc.nodes.length > 1 && !manyRuns ? palette[ni % palette.length] : "#333",
        values: function (u, vals) { return vals.map(fmt); }
      });
      k++;
    });
    var series = [{ label: abs ? "time" : "since start", value: function (u, v) { return v == null ? "–" : abs ? utc(v) : fmt(v) + " min"; } }];
    var runIdx = {}, nr = 0;
    shown.forEach(function (s) {
      if (!(s.run in runIdx)) { runIdx[s.run] = nr++; }
      var n = nodes[s.node] || {};
      var ci = manyRuns ? runIdx[s.run] : nodeIdx[s.node];
      var sr = {
        label: manyRuns ? s.label : s.node, scale: s.node, spanGaps: true, width: 1.5,
        stroke: palette[ci % palette.length],
        value: function (u, v) { return withUnit(v, n.unit); }
      };
      var d = dashes[(nodeIdx[s.node] || 0) % dashes.length];
      if (d && manyRuns) { sr.dash = d; }
      series.push(sr);
    });
    var uBands = [];
    bands.forEach(function (b) {
      var n = nodes[b.node] || {}, hi = series.length;
      var k = " (" + b.k + "σ)";
      series.push({ label: "golden high · " + b.node + k, scale: b.node, spanGaps: true, width: 0.5, stroke: "#8a8a8a", value: function (u, v) { return withUnit(v, n.unit); } });
      series.push({ label: "golden low · " + b.node + k, scale: b.node, spanGaps: true, width: 0.5, stroke: "#8a8a8a", value: function (u, v) { return withUnit(v, n.unit); } });
      series.push({ label: "golden mean · " + b.node + " (" + b.runs.length + " runs)", scale: b.node, spanGaps: true, width: 1, dash: [6, 3], stroke: "#555", value: function (u, v) { return withUnit(v, n.unit); } });
      uBands.push({ series: [hi, hi + 1], fill: "rgba(120,120,120,0.18)" });
    });
    var limitsHook = function (u) {
      var ctx = u.ctx, b = u.bbox;
      ctx.save();
      ctx.lineWidth = 1;
      ctx.setLineDash([4, 4]);
      ctx.strokeStyle = "#777";
      doc.nodes.forEach(function (n) {
        if (!used[n.id]) { return; }
        [n.min, n.max].forEach(function (v) {
          if (v == null) { return; }
          var y = u.valToPos(v, n.id, true);
          if (!isFinite(y) || y < b.top || y > b.top + b.height) { return; }
          ctx.beginPath(); ctx.moveTo(b.left, y); ctx.lineTo(b.left + b.width, y); ctx.stroke();
        });
      });
      ctx.restore();
    };
    var width = Math.max(320, plotEl.clientWidth || fig.clientWidth || 800);
    var opts = {
      width: width, height: 360, scales: scales, axes: axes, series: series,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      cursor: { drag: { x: true, y: false }, sync: { key: "aml" } },
      legend: { live: true },
      bands: uBands,
      hooks: {
        draw: [limitsHook],
        // The visible x range, for the page's own tests and tools.
        setScale: [function (u, key) { if (key === "x") { fig.setAttribute("data-x", fmt(u.scales.x.min) + ".." + fmt(u.scales.x.max)); } }]
      }
    };
    var u = new uPlot(opts, data, plotEl);
    fig.setAttribute("data-x", fmt(u.scales.x.min) + ".." + fmt(u.scales.x.max));
    var fullMin = data[0][0], fullMax = data[0][data[0].length - 1];
    function setX(lo, hi) {
      var w = hi - lo, full = fullMax - fullMin;
      if (w >= full || w <= 0) { lo = fullMin; hi = fullMax; } else {
        if (lo < fullMin) { hi += fullMin - lo; lo = fullMin; }
        if (hi > fullMax) { lo -= hi - fullMax; hi = fullMax; }
      }
      u.setScale("x", { min: lo, max: hi });
    }
    function zoom(f, c) {
      var lo = u.scales.x.min, hi = u.scales.x.max;
      if (c == null) { c = (lo + hi) / 2; }
      setX(c - (c - lo) * f, c + (hi - c) * f);
    }
    function pan(frac) {
      var lo = u.scales.x.min, hi = u.scales.x.max, d = (hi - lo) * frac;
      setX(lo + d, hi + d);
    }
    var act = {
      "in": function () { zoom(0.5); }, out: function () { zoom(2); },
      left: function () { pan(-0.25); }, right: function () { pan(0.25); },
      reset: function () { setX(fullMin, fullMax); }
    };
    fig.querySelectorAll(".ichart-tools button[data-act]").forEach(function (b) {
      b.addEventListener("click", function () { act[b.getAttribute("data-act")](); });
    });
    plotEl.addEventListener("keydown", function (e) {
      var f = { "+": act["in"], "=": act["in"], "-": act.out, ArrowLeft: act.left, ArrowRight: act.right, "0": act.reset }[e.key];
      if (f) { e.preventDefault(); f(); }
    });
    u.over.addEventListener("wheel", function (e) {
      e.preventDefault();
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) { pan((e.deltaX || e.deltaY) > 0 ? 0.1 : -0.1); return; }
      zoom(e.deltaY < 0 ? 0.8 : 1.25, u.posToVal(e.offsetX, "x"));
    }, { passive: false });
    var fb = fig.querySelector(".ichart-fallback");
    if (fb) { fb.parentNode.removeChild(fb); }
    fig.setAttribute("data-state", "ready");
    fig.setAttribute("data-series", String(shown.length));
    fig.setAttribute("data-bands", String(bands.length));
    fig.setAttribute("data-points", String(data[0].length));
    status.textContent = shown.length + " series, " + data[0].length + " points" + (abs ? ", times in UTC" : "");
    return u;
  }

  document.querySelectorAll("figure.ichart[data-src]").forEach(function (fig) {
    var plotEl = fig.querySelector(".ichart-plot");
    var status = fig.querySelector(".ichart-status");
    fetch(fig.getAttribute("data-src"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.json().then(function (b) { return { ok: r.ok, body: b }; }); })
      .then(function (res) {
        if (!res.ok) {
          fig.setAttribute("data-state", "error");
          status.textContent = (res.body && res.body.error) ? res.body.error.code + ": " + res.body.error.message : "the chart data could not be read";
          return;
        }
        var u = draw(fig, plotEl, res.body);
        if (u) {
          window.addEventListener("resize", function () {
            u.setSize({ width: Math.max(320, plotEl.clientWidth || 800), height: 360 });
          });
        }
      })
      .catch(function (e) { fig.setAttribute("data-state", "error"); status.textContent = "chart: " + e; });
  });
})();
