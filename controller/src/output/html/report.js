// Draws the charts the report's data describes (#report-data) with uPlot, and records what it
// drew in #render-check: per chart its data points and the pixels painted in its first line's
// colour, so a test (or a curious person) can tell a chart that rendered from a blank one.
(function () {
  "use strict";
  // No greys (the grid's) and no greens or reds (the thresholds'): the pixel count below tells
  // the data's lines apart by colour.
  var PALETTE = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#0b2d6b"];
  var PASS = "#2e9d32";
  var FAIL = "#d01c1c";
  var NEAR = 24;
  var HEIGHT = 280;

  var data = JSON.parse(document.getElementById("report-data").textContent);

  function rgb(hex) {
    return [1, 3, 5].map(function (i) { return parseInt(hex.slice(i, i + 2), 16); });
  }

  // Read back through a canvas of our own, made for reading (uPlot's is made for drawing).
  var scratch = document.createElement("canvas").getContext("2d", { willReadFrequently: true });

  // Pixels of the chart within a small distance of one of `colours`: the data's lines.
  function painted(u, colours) {
    var wanted = colours.map(rgb);
    var c = u.ctx.canvas;
    scratch.canvas.width = c.width;
    scratch.canvas.height = c.height;
    scratch.drawImage(c, 0, 0);
    var px = scratch.getImageData(0, 0, c.width, c.height).data;
    var n = 0;
    for (var i = 0; i < px.length; i += 4) {
      if (px[i + 3] < 200) continue;
      for (var k = 0; k < wanted.length; k++) {
        var w = wanted[k];
        if (Math.abs(px[i] - w[0]) < NEAR && Math.abs(px[i + 1] - w[1]) < NEAR && Math.abs(px[i + 2] - w[2]) < NEAR) {
          n++;
          break;
        }
      }
    }
    return n;
  }

  // 0 nines is 0%, 1 is 90%, 2 is 99%, 3 is 99.9%.
  function percentile(nines) {
    var p = 100 * (1 - Math.pow(10, -nines));
    return (Math.round(p * 10000) / 10000) + "%";
  }

  function number(v) {
    if (v == null) return "–";
    var a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 1 ? v.toFixed(2) : v.toFixed(3);
  }

  function chartWidth(box) {
    return Math.max(320, box.clientWidth || 900);
  }

  function draw(spec) {
    var box = document.getElementById("chart-" + spec.id);
    var entry = { id: spec.id, title: spec.title, points: 0, painted: 0, drawn: false, empty: spec.empty || null };
    volleyCheck.charts.push(entry);
    if (spec.empty) {
      var title = document.createElement("div");
      title.className = "u-title";
      title.textContent = spec.title;
      var note = document.createElement("p");
      note.className = "empty";
      note.textContent = spec.empty;
      box.appendChild(title);
      box.appendChild(note);
      return null;
    }
    var spectrum = spec.x === "percentile";
    var series = [{ label: spectrum ? "percentile" : "second", value: function (u, v) {
      return v == null ? "–" : spectrum ? percentile(v) : v + " s";
    } }];
    var columns = [spec.xs];
    var colour = 0;
    var colours = [];
    // A log axis has no place for zero.
    var fit = spec.log ? function (v) { return v != null && v > 0 ? v : null; } : function (v) { return v; };
    spec.series.forEach(function (s) {
      var line = { label: s.label, width: 2, spanGaps: false, value: function (u, v) { return number(v); } };
      if (s.style === "main" || s.style === "worker") {
        line.stroke = PALETTE[colour++ % PALETTE.length];
        if (s.style === "worker") {
          line.width = 1.5;
          line.dash = [6, 3];
        }
        colours.push(line.stroke);
        entry.points += s.values.filter(function (v) { return fit(v) != null; }).length;
      } else {
        line.stroke = s.passed ? PASS : FAIL;
        line.dash = [10, 5];
        line.width = 1.5;
        if (s.style === "marker") {
          line.paths = function () { return null; };
          line.points = { show: true, size: 11, width: 2, fill: "#fff" };
        }
      }
      if (s.style !== "marker") {
        line.points = { show: false };
      }
      series.push(line);
      columns.push(s.values.map(fit));
    });
    // Whole seconds on a run's time axis.
    var xAxis = { label: spectrum ? "percentile" : "second of the run", incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600] };
    if (spectrum) {
      xAxis.splits = function (u, i, min, max) {
        var out = [];
        for (var n = Math.ceil(min); n <= Math.floor(max); n++) out.push(n);
        return out;
      };
      xAxis.values = function (u, splits) { return splits.map(percentile); };
    }
    var opts = {
      title: spec.title,
      width: chartWidth(box),
      height: HEIGHT,
      scales: {
        x: { time: false },
        y: spec.log ? { distr: 3, log: 10 } : { range: function (u, min, max) { return [0, max > 0 ? max * 1.05 : 1]; } },
      },
      axes: [xAxis, { label: spec.unit, size: 60 }],
      series: series,
      legend: { live: true },
      hooks: {
        draw: [function (u) {
          entry.drawn = true;
          entry.painted = painted(u, colours);
          publishCheck();
        }],
      },
    };
    return new uPlot(opts, columns, box);
  }

  var plots = data.charts.map(draw);
  window.addEventListener("resize", function () {
    plots.forEach(function (u) {
      if (u) u.setSize({ width: chartWidth(u.root.parentNode), height: HEIGHT });
    });
  });
  volleyCheck.done = true;
  publishCheck();
})();
