// offload analyze: canvas charts for the self-contained HTML report.
// No dependencies, no network. Each chart: title, axis labels, legend,
// drag-to-zoom (both axes), wheel zoom on x, double-click reset, hover.
(function () {
  "use strict";
  window.addEventListener("error", function (e) {
    document.body.dataset.jsError = String(e.message || e);
  });
  var W = 540, H = 250, ML = 66, MR = 12, MT = 8, MB = 34;
  var drawn = 0;

  function nice(range) {
    if (!(range > 0) || !isFinite(range)) return 1;
    var raw = range / 5, mag = Math.pow(10, Math.floor(Math.log10(raw))), n = raw / mag;
    return mag * (n < 1.5 ? 1 : n < 3.5 ? 2 : n < 7.5 ? 5 : 10);
  }
  function fmt(v, step) {
    var a = Math.abs(v);
    if (step > 0 && step < 1) return v.toFixed(Math.min(6, Math.ceil(-Math.log10(step))));
    if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    return v.toFixed(0);
  }

  // series: {name, color, kind: "vbar"|"step"|"points"|"bars"|"line"|"mark", pts: [[x, y, y2?, label?]]}
  function chart(parent, spec) {
    var box = document.createElement("div");
    box.className = "chart";
    var h = document.createElement("h4");
    h.textContent = spec.title;
    box.appendChild(h);
    var cv = document.createElement("canvas");
    var dpr = window.devicePixelRatio || 1;
    cv.width = W * dpr; cv.height = H * dpr;
    cv.style.width = W + "px"; cv.style.height = H + "px";
    cv.setAttribute("role", "img");
    cv.setAttribute("aria-label", spec.title);
    box.appendChild(cv);
    var leg = document.createElement("div");
    leg.className = "legend";
    spec.series.forEach(function (s) {
      if (!s.pts.length) return;
      var it = document.createElement("span");
      var sw = document.createElement("i");
      sw.style.background = s.color;
      it.appendChild(sw);
      it.appendChild(document.createTextNode(s.name + " (" + s.pts.length +
        (s.of && s.of > s.pts.length ? " of " + s.of + " shown" : "") + ")"));
      leg.appendChild(it);
    });
    box.appendChild(leg);
    var tip = document.createElement("div");
    tip.className = "tip";
    box.appendChild(tip);
    parent.appendChild(box);

    var all = [];
    spec.series.forEach(function (s) { if (!s.noFit) s.pts.forEach(function (p) { all.push(p); }); });
    var x0 = Infinity, x1 = -Infinity, y0 = spec.yFromZero ? 0 : Infinity, y1 = -Infinity;
    all.forEach(function (p) {
      x0 = Math.min(x0, p[0]); x1 = Math.max(x1, p[0]);
      y0 = Math.min(y0, p[1], p.length > 2 && typeof p[2] === "number" ? p[2] : p[1]);
      y1 = Math.max(y1, p[1], p.length > 2 && typeof p[2] === "number" ? p[2] : p[1]);
    });
    if (!all.length) { x0 = 0; x1 = 1; y0 = 0; y1 = 1; }
    if (x1 <= x0) x1 = x0 + 1e-3;
    if (y1 <= y0) y1 = y0 + 1;
    var pad = (y1 - y0) * 0.04;
    var full = [x0, x1, y0 - (spec.yFromZero ? 0 : pad), y1 + pad];
    var view = full.slice();
    var ctx = cv.getContext("2d");
    function X(v) { return ML + (v - view[0]) / (view[1] - view[0]) * (W - ML - MR); }
    function Y(v) { return H - MB - (v - view[2]) / (view[3] - view[2]) * (H - MT - MB); }

    function draw(sel) {
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      ctx.fillStyle = "#fbfbfd";
      ctx.fillRect(ML, MT, W - ML - MR, H - MT - MB);
      ctx.font = "10px system-ui, sans-serif";
      ctx.fillStyle = "#333";
      ctx.strokeStyle = "#e2e2e8";
      var sx = nice(view[1] - view[0]), sy = nice(view[3] - view[2]);
      ctx.textAlign = "center";
      for (var v = Math.ceil(view[0] / sx) * sx; v <= view[1]; v += sx) {
        ctx.beginPath(); ctx.moveTo(X(v), MT); ctx.lineTo(X(v), H - MB); ctx.stroke();
        ctx.fillText(fmt(v, sx), X(v), H - MB + 12);
      }
      ctx.textAlign = "right";
      for (v = Math.ceil(view[2] / sy) * sy; v <= view[3]; v += sy) {
        ctx.beginPath(); ctx.moveTo(ML, Y(v)); ctx.lineTo(W - MR, Y(v)); ctx.stroke();
        ctx.fillText(fmt(v, sy), ML - 4, Y(v) + 3);
      }
      ctx.textAlign = "center";
      ctx.fillText(spec.xlabel, ML + (W - ML - MR) / 2, H - 6);
      ctx.save();
      ctx.translate(11, MT + (H - MT - MB) / 2);
      ctx.rotate(-Math.PI / 2);
      ctx.fillText(spec.ylabel, 0, 0);
      ctx.restore();
      ctx.save();
      ctx.beginPath(); ctx.rect(ML, MT, W - ML - MR, H - MT - MB); ctx.clip();
      var count = 0;
      spec.series.forEach(function (s) {
        ctx.strokeStyle = s.color; ctx.fillStyle = s.color; ctx.lineWidth = 1;
        var p, i;
        if (s.kind === "step" || s.kind === "line") {
          ctx.beginPath();
          for (i = 0; i < s.pts.length; i++) {
            p = s.pts[i];
            if (i === 0) ctx.moveTo(X(p[0]), Y(p[1]));
            else {
              if (s.kind === "step") ctx.lineTo(X(p[0]), Y(s.pts[i - 1][1]));
              ctx.lineTo(X(p[0]), Y(p[1]));
            }
          }
          ctx.lineWidth = s.kind === "line" ? 2 : 1.2;
          ctx.stroke();
          count += s.pts.length;
          return;
        }
        for (i = 0; i < s.pts.length; i++) {
          p = s.pts[i];
          var x = X(p[0]), y = Y(p[1]);
          if (s.kind === "vbar") {
            var y2 = Y(p[2]);
            ctx.fillRect(x - 1, Math.min(y, y2), 2, Math.max(1.5, Math.abs(y - y2)));
            ctx.fillRect(x - 2.5, y2 - 0.5, 5, 1);
          } else if (s.kind === "bars") {
            var bw = Math.max(1, X(p[0] + spec.binWidth) - x - 1);
            ctx.globalAlpha = 0.55;
            ctx.fillRect(x, y, bw, H - MB - y);
            ctx.globalAlpha = 1;
          } else if (s.kind === "mark") {
            ctx.font = "bold 10px system-ui, sans-serif";
            ctx.fillText(s.mark, x, y - 2);
          } else {
            ctx.fillRect(x - 1.5, y - 1.5, 3, 3);
          }
        }
        count += s.pts.length;
      });
      if (sel) {
        ctx.fillStyle = "rgba(31,119,180,0.15)";
        ctx.fillRect(sel[0], sel[1], sel[2] - sel[0], sel[3] - sel[1]);
      }
      ctx.restore();
      cv.dataset.points = String(count);
    }

    function pos(e) {
      var r = cv.getBoundingClientRect();
      return [e.clientX - r.left, e.clientY - r.top];
    }
    function inv(px, py) {
      return [view[0] + (px - ML) / (W - ML - MR) * (view[1] - view[0]),
              view[2] + (H - MB - py) / (H - MT - MB) * (view[3] - view[2])];
    }
    var drag = null;
    cv.addEventListener("mousedown", function (e) { drag = pos(e); });
    cv.addEventListener("mousemove", function (e) {
      var m = pos(e);
      if (drag) {
        draw([Math.min(drag[0], m[0]), Math.min(drag[1], m[1]), Math.max(drag[0], m[0]), Math.max(drag[1], m[1])]);
        return;
      }
      var best = null, bd = 64;
      spec.series.forEach(function (s) {
        s.pts.forEach(function (p) {
          var dx = X(p[0]) - m[0], dy = Y(p[1]) - m[1], d = dx * dx + dy * dy;
          if (d < bd) { bd = d; best = [s, p]; }
        });
      });
      if (!best) { tip.style.display = "none"; return; }
      var p = best[1];
      tip.textContent = best[0].name + "\n" + spec.xlabel + ": " + (+p[0]).toPrecision(6) + "\n" +
        spec.ylabel + ": " + (+p[1]).toLocaleString() +
        (p.length > 2 && typeof p[2] === "number" ? " .. " + (+p[2]).toLocaleString() : "") +
        (p.length > 3 && p[3] ? "\n" + p[3] : "") +
        (p.length > 4 && p[4] ? "\nframe " + p[4] : "");
      tip.style.display = "block";
      tip.style.left = Math.min(m[0] + 12, W - 120) + "px";
      tip.style.top = (m[1] + 24) + "px";
    });
    cv.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    cv.addEventListener("mouseup", function (e) {
      var m = pos(e), d = drag;
      drag = null;
      if (!d || Math.abs(m[0] - d[0]) < 5) { draw(); return; }
      var a = inv(Math.min(d[0], m[0]), Math.max(d[1], m[1])), b = inv(Math.max(d[0], m[0]), Math.min(d[1], m[1]));
      view = Math.abs(m[1] - d[1]) < 5 ? [a[0], b[0], view[2], view[3]] : [a[0], b[0], a[1], b[1]];
      draw();
    });
    cv.addEventListener("wheel", function (e) {
      e.preventDefault();
      var c = inv(pos(e)[0], 0)[0], k = e.deltaY < 0 ? 0.8 : 1.25;
      view = [c - (c - view[0]) * k, c + (view[1] - c) * k, view[2], view[3]];
      draw();
    }, { passive: false });
    cv.addEventListener("dblclick", function () { view = full.slice(); draw(); });
    draw();
    drawn += 1;
    document.body.dataset.charts = String(drawn);
  }

  var REASON_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                       "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

  function flowCharts(el, d) {
    var g = d.graphs, tcp = d.protocol === "tcp";
    if (tcp || g.seq.length) {
      var data = [], re = [];
      var ooo = [];
      g.seq.forEach(function (p) {
        (p.retrans ? re : p.ooo ? ooo : data).push([p.t, p.seq, p.seq + p.len, p.len + " bytes", p.frame]);
      });
      var ack = [], win = [], sack = [], dup = [], zero = [];
      g.acks.forEach(function (a) {
        ack.push([a.t, a.ack, null, "", a.frame]);
        win.push([a.t, a.win, null, "window " + a.window + " B" + (a.window_scale_known ? "" : " (scale unknown: raw)"), a.frame]);
        a.sack.forEach(function (s) { sack.push([a.t, s[0], s[1], "SACK", a.frame]); });
        if (a.dup) dup.push([a.t, a.ack, null, "duplicate ACK", a.frame]);
        if (a.zero_window) zero.push([a.t, a.ack, null, "zero window", a.frame]);
      });
      var sh = g.shown || [{}, {}, {}], thin = function (x) {
        return x && x.seen > x.shown ? " (" + x.shown + " of " + x.seen + " points shown" +
          (x.rare_dropped ? ", " + x.rare_dropped + " of " + x.rare_seen + " marked points thinned" : "") + ")" : "";
      };
      var title = g.ack_only
        ? "Time-sequence: ACKs sent by this direction (no payload), relative to its first ACK"
        : tcp ? "Time-sequence (tcptrace style): data, the peer's ACK line and receive window"
              : "Bytes over time (UDP)";
      title += thin(sh[0]) + thin(sh[1]);
      chart(el, {
        title: title, xlabel: "time (s)", ylabel: g.ack_only ? "relative ACK number" : tcp ? "relative sequence number" : "bytes",
        series: [
          { name: "data segment", color: "#1f77b4", kind: "vbar", pts: data },
          { name: "retransmission", color: "#d62728", kind: "vbar", pts: re },
          { name: "late original (reordered)", color: "#e377c2", kind: "vbar", pts: ooo },
          { name: "ACK line", color: "#2ca02c", kind: "step", pts: ack },
          { name: "receive window edge", color: "#bcbd22", kind: "step", pts: win, noFit: true },
          { name: "SACK block", color: "#9467bd", kind: "vbar", pts: sack },
          { name: "duplicate ACK (D)", color: "#ff7f0e", kind: "mark", mark: "D", pts: dup },
          { name: "zero window (Z)", color: "#d62728", kind: "mark", mark: "Z", pts: zero }
        ]
      });
    }
    if (tcp && !g.ack_only) {
      chart(el, {
        title: "Round-trip time: data segment to the ACK of its end (" + ((g.shown || [{}, {}, {}])[2].seen || g.rtt.length) + " samples)",
        xlabel: "time (s)", ylabel: "RTT (ms)", yFromZero: true,
        series: [{ name: "RTT sample", color: "#17becf", kind: "points", of: (g.shown || [{}, {}, {}])[2].seen,
                   pts: g.rtt.map(function (r) { return [r.t, r.rtt_ms, null, "data frame " + r.data_frame, r.frame]; }) }]
      });
      var rwin = [], bif = [];
      g.acks.forEach(function (a) { rwin.push([a.t, a.window, null, a.window_scale_known ? "" : "scale unknown: raw field", a.frame]); });
      g.seq.forEach(function (p) { if (p.in_flight > 0) bif.push([p.t, p.in_flight, null, "", p.frame]); });
      chart(el, {
        title: "Receive window advertised by the peer, and bytes in flight",
        xlabel: "time (s)", ylabel: "bytes", yFromZero: true,
        series: [{ name: "receive window", color: "#bcbd22", kind: "step", pts: rwin },
                 { name: "bytes in flight", color: "#1f77b4", kind: "points", pts: bif }]
      });
    }
    var bs = (g.bin_ns || 1) / 1e9, bars = [], avg = [], K = 5, sum = 0;
    g.bins.forEach(function (b, i) {
      var bps = b * 8 / bs;
      bars.push([i * bs, bps, null, (b * 8 / bs / 1e6).toFixed(2) + " Mbit/s"]);
      sum += bps;
      if (i >= K) sum -= g.bins[i - K] * 8 / bs;
      avg.push([(i + 0.5) * bs, sum / Math.min(i + 1, K)]);
    });
    chart(el, {
      title: "Throughput (payload), bins of " + (bs >= 1 ? bs.toFixed(3) + " s" : (bs * 1e3).toPrecision(3) + " ms") +
             ", moving average over " + K + " bins",
      xlabel: "time (s)", ylabel: "bit/s", yFromZero: true, binWidth: bs,
      series: [{ name: "per bin", color: "#1f77b4", kind: "bars", pts: bars },
               { name: K + "-bin moving average", color: "#d62728", kind: "line", pts: avg }]
    });
    var byReason = {}, order = [];
    g.gro.forEach(function (p) {
      if (!byReason[p.reason]) { byReason[p.reason] = []; order.push(p.reason); }
      byReason[p.reason].push([p.t, p.segments, null, "flush: " + p.reason]);
    });
    chart(el, {
      title: "GRO view at gro_max_size " + d.gro_max_size + ": segments per packet handed to the stack, by flush reason",
      xlabel: "time (s)", ylabel: "segments per packet", yFromZero: true,
      series: order.map(function (r, i) {
        return { name: r, color: REASON_COLORS[i % REASON_COLORS.length], kind: "points", pts: byReason[r] };
      })
    });
  }

  var blocks = document.querySelectorAll("section.flow");
  for (var i = 0; i < blocks.length; i++) {
    var el = blocks[i].querySelector(".plots"), js = blocks[i].querySelector("script.graph-data");
    if (el && js) flowCharts(el, JSON.parse(js.textContent));
  }
  document.body.dataset.ready = "1";
})();
