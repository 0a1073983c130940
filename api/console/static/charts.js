// Plain SVG charts drawn in the browser (no charting library: nothing to vendor, and the
// CSP can stay 'self'-only). Labels are SVG text nodes set through textContent.
"use strict";

(function () {
  const NS = "http://www.w3.org/2000/svg";
  const W = 640;
  const H = 340;
  const M = { top: 24, right: 56, bottom: 48, left: 64 };

  function svg(tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function ticks(lo, hi, n = 5) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / n;
    const mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const out = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
      out.push(Number(t.toPrecision(12)));
    }
    return out;
  }

  function extent(values, pad = 0.05) {
    let lo = Math.min(...values);
    let hi = Math.max(...values);
    if (!Number.isFinite(lo)) return [0, 1];
    if (hi === lo) {
      const d = Math.abs(lo) || 1;
      return [lo - d * 0.5, hi + d * 0.5];
    }
    const d = (hi - lo) * pad;
    return [lo - d, hi + d];
  }

  // A plot frame with axes: returns {root, x(v), y(v)} in data units.
  function frame(container, xDomain, yDomain, { xLabel, yLabel, title }) {
    const root = svg("svg", {
      viewBox: `0 0 ${W} ${H}`,
      width: W,
      height: H,
      role: "img",
      "aria-label": title,
    });
    const x = (v) => M.left + ((v - xDomain[0]) / (xDomain[1] - xDomain[0])) * (W - M.left - M.right);
    const y = (v) => H - M.bottom - ((v - yDomain[0]) / (yDomain[1] - yDomain[0])) * (H - M.top - M.bottom);
    const axes = svg("g", { class: "axes" });
    axes.append(
      svg("line", { x1: M.left, y1: H - M.bottom, x2: W - M.right, y2: H - M.bottom }),
      svg("line", { x1: M.left, y1: M.top, x2: M.left, y2: H - M.bottom }),
    );
    for (const t of ticks(...xDomain)) {
      if (t < xDomain[0] || t > xDomain[1]) continue;
      axes.append(
        svg("line", { x1: x(t), y1: H - M.bottom, x2: x(t), y2: H - M.bottom + 5 }),
        svg("text", { x: x(t), y: H - M.bottom + 18, "text-anchor": "middle" }, PM.fmt(t, 6)),
      );
    }
    for (const t of ticks(...yDomain)) {
      if (t < yDomain[0] || t > yDomain[1]) continue;
      axes.append(
        svg("line", { x1: M.left - 5, y1: y(t), x2: M.left, y2: y(t) }),
        svg("text", { x: M.left - 8, y: y(t) + 4, "text-anchor": "end" }, PM.fmt(t, 6)),
      );
    }
    axes.append(
      svg("text", { x: (M.left + W - M.right) / 2, y: H - 8, "text-anchor": "middle", class: "label" }, xLabel),
      svg(
        "text",
        { x: 14, y: (M.top + H - M.bottom) / 2, "text-anchor": "middle", class: "label", transform: `rotate(-90 14 ${(M.top + H - M.bottom) / 2})` },
        yLabel,
      ),
    );
    root.append(axes);
    container.replaceChildren(root);
    return { root, x, y };
  }

  function showTooltip(event, lines) {
    const tip = PM.byId("tooltip");
    tip.replaceChildren(...lines.map((line) => PM.el("div", {}, line)));
    tip.hidden = false;
    tip.style.left = `${event.pageX + 12}px`;
    tip.style.top = `${event.pageY + 12}px`;
  }

  function hideTooltip() {
    PM.byId("tooltip").hidden = true;
  }

  // Points {x, y, label: [lines], tag, band: [lo, hi] (optional)}; options: line {from,
  // to} in data units, connect, onClick(point, node), pointClass. Points with a band
  // get a shaded area from lo to hi along the connected line.
  function scatter(container, points, options) {
    const xs = points.map((p) => p.x);
    const banded = points.filter((p) => Array.isArray(p.band) && p.band.every(Number.isFinite));
    const ys = [...points.map((p) => p.y), ...banded.flatMap((p) => p.band)];
    const lineEnds = options.line ? [options.line.from, options.line.to] : [];
    const xDomain = extent([...xs, ...lineEnds.map((e) => e[0])]);
    const yDomain = extent([...ys, ...lineEnds.map((e) => e[1])]);
    if (options.fromZero) {
      xDomain[0] = Math.min(0, xDomain[0]);
      yDomain[0] = Math.min(0, yDomain[0]);
    }
    const { root, x, y } = frame(container, xDomain, yDomain, options);
    if (options.line) {
      const [a, b] = lineEnds;
      root.append(svg("line", { class: "reference", x1: x(a[0]), y1: y(a[1]), x2: x(b[0]), y2: y(b[1]) }));
      if (options.line.label) {
        root.append(svg("text", { class: "reference-label", x: x(b[0]) - 4, y: y(b[1]) - 6, "text-anchor": "end" }, options.line.label));
      }
    }
    if (banded.length > 1) {
      const byX = [...banded].sort((a, b) => a.x - b.x);
      const upper = byX.map((p) => `${x(p.x)},${y(p.band[1])}`);
      const lower = byX.reverse().map((p) => `${x(p.x)},${y(p.band[0])}`);
      const area = svg("polygon", { class: "band", points: [...upper, ...lower].join(" ") });
      if (options.bandLabel) area.append(svg("title", {}, options.bandLabel));
      root.append(area);
    }
    for (const p of banded) {
      // a whisker per point too: the band of a lone point, and where each band was measured
      root.append(svg("line", { class: "band-whisker", x1: x(p.x), y1: y(p.band[0]), x2: x(p.x), y2: y(p.band[1]) }));
    }
    if (options.connect && points.length > 1) {
      const path = points.map((p) => `${x(p.x)},${y(p.y)}`).join(" ");
      root.append(svg("polyline", { class: "curve", points: path }));
    }
    const group = svg("g", { class: "points" });
    points.forEach((p, i) => {
      const dot = svg("circle", {
        class: options.pointClass || "point",
        cx: x(p.x),
        cy: y(p.y),
        r: options.radius || 6,
        tabindex: options.onClick ? 0 : -1,
        "data-index": i,
      });
      dot.append(svg("title", {}, p.label.join("\n")));
      dot.addEventListener("mouseenter", (event) => showTooltip(event, p.label));
      dot.addEventListener("mouseleave", hideTooltip);
      if (options.onClick) {
        dot.addEventListener("click", () => options.onClick(p, dot));
        dot.addEventListener("keydown", (event) => {
          if (event.key === "Enter") options.onClick(p, dot);
        });
      }
      group.append(dot);
      if (p.tag) {
        group.append(svg("text", { class: "point-tag", x: x(p.x) + 9, y: y(p.y) - 9 }, p.tag));
      }
    });
    root.append(group);
    return root;
  }

  function histogram(container, values, options) {
    const bins = options.bins || 10;
    let [lo, hi] = values.length ? [Infinity, -Infinity] : [0, 1];
    for (const v of values) {
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
    const width = hi > lo ? (hi - lo) / bins : 1;
    const counts = new Array(bins).fill(0);
    for (const v of values) counts[Math.min(bins - 1, Math.floor((v - lo) / width))] += 1;
    return bars(container, { low: lo, high: lo + width * bins, counts }, options);
  }

  // Bars of equal-width bins {low, high, counts} (e.g. the server's ε histogram).
  function bars(container, { low, high, counts }, options) {
    const lo = low;
    const width = counts.length ? (high - low) / counts.length : 1;
    const { root, x, y } = frame(container, [lo, lo + width * Math.max(1, counts.length)], [0, Math.max(1, ...counts) * 1.1], options);
    const group = svg("g", { class: "bars" });
    counts.forEach((count, i) => {
      const left = lo + i * width;
      const bar = svg("rect", {
        class: "bar",
        x: x(left) + 1,
        y: y(count),
        width: Math.max(1, x(left + width) - x(left) - 2),
        height: y(0) - y(count),
      });
      bar.append(svg("title", {}, `${count} sellers with ε in [${PM.fmt(left)}, ${PM.fmt(left + width)})`));
      group.append(bar);
    });
    root.append(group);
    return root;
  }

  // Horizontal bars: items {label, value, max, text}; value over max fills the bar.
  function meters(container, items, { title }) {
    const row = 34;
    const height = Math.max(1, items.length) * row + 10;
    const root = svg("svg", { viewBox: `0 0 ${W} ${height}`, width: W, height, role: "img", "aria-label": title });
    const left = 230;
    const right = 200;
    const clip = (text) => (text.length > 34 ? `${text.slice(0, 33)}…` : text);
    items.forEach((item, i) => {
      const top = 8 + i * row;
      const full = W - left - right;
      const share = item.max > 0 ? Math.min(1, Math.max(0, item.value / item.max)) : 0;
      const g = svg("g", { class: "meter" });
      g.append(
        svg("text", { x: left - 8, y: top + 15, "text-anchor": "end" }, clip(item.label)),
        svg("rect", { class: "meter-track", x: left, y: top, width: full, height: 20 }),
        svg("rect", { class: "meter-fill", x: left, y: top, width: full * share, height: 20 }),
        svg("text", { x: left + full + 8, y: top + 15 }, item.text),
      );
      root.append(g);
    });
    container.replaceChildren(root);
    return root;
  }

  PM.charts = { scatter, histogram, bars, meters };
})();
