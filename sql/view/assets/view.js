// rftpipe view: the overview's curves (hand-written SVG, one series per
// experiment: hover for values, drag to zoom on a step range, click a point
// to open its step) and small
// conveniences (the colour selector applies on change).
"use strict";

(function () {
  const NS = "http://www.w3.org/2000/svg";
  const W = 460, H = 200, L = 52, R = 10, T = 8, B = 26;

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function fmt(v) {
    if (v === null || v === undefined) return "–";
    return String(Number(Number(v).toPrecision(4)));
  }

  function ticks(lo, hi, n) {
    if (hi === lo) return [lo];
    const step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    const err = (hi - lo) / n / step;
    const s = step * (err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1);
    const out = [];
    for (let i = Math.ceil(lo / s - 1e-9); i * s <= hi + s * 1e-9; i++) out.push(Number((i * s).toPrecision(12)));
    return out;
  }

  // chart draws one plot of the curves, a line per experiment (series:
  // its name and steps), between the step range dom.
  function chart(box, title, key, series, state) {
    const div = document.createElement("div");
    div.className = "plot";
    div.dataset.key = key;
    const h = document.createElement("h3");
    h.textContent = title;
    div.appendChild(h);
    const svg = el("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title });
    div.appendChild(svg);
    const tip = document.createElement("div");
    tip.className = "tip";
    div.appendChild(tip);
    box.appendChild(div);

    let pts = [], sx = null, guide = null;
    function draw() {
      svg.textContent = "";
      const [x0, x1] = state.dom;
      const lines = series.map(s => s.steps.filter(d => d.x >= x0 && d.x <= x1 && d[key] !== null && d[key] !== undefined));
      const shown = lines.flat();
      const xs = shown.map(d => d.x), ys = shown.map(d => d[key]);
      if (!shown.length) {
        el("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, svg).textContent = "no values in this range";
        pts = [];
        return;
      }
      let y0 = Math.min(...ys), y1 = Math.max(...ys);
      if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
      const pad = (y1 - y0) * 0.06;
      y0 -= pad; y1 += pad;
      const a = Math.min(...xs), b = Math.max(...xs) === a ? a + 1 : Math.max(...xs);
      sx = v => L + (v - a) / (b - a) * (W - L - R);
      const sy = v => T + (1 - (v - y0) / (y1 - y0)) * (H - T - B);
      const counts = key === "dropped_groups";
      for (const t of ticks(y0, y1, 4)) {
        if (counts && !Number.isInteger(t)) continue;
        el("line", { class: "gridline", x1: L, x2: W - R, y1: sy(t), y2: sy(t) }, svg);
        el("text", { x: L - 4, y: sy(t) + 3, "text-anchor": "end" }, svg).textContent = fmt(Number(t.toPrecision(6)));
      }
      for (const t of ticks(a, b, 6)) {
        if (!Number.isInteger(t)) continue;
        el("text", { x: sx(t), y: H - 8, "text-anchor": "middle" }, svg).textContent = String(t);
      }
      el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }, svg);
      el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
      pts = [];
      lines.forEach((line, k) => {
        if (!line.length) return;
        const c = "c" + (k % 6);
        el("path", { class: "line " + c, d: line.map((d, i) => (i ? "L" : "M") + sx(d.x).toFixed(1) + "," + sy(d[key]).toFixed(1)).join("") }, svg);
        const ps = line.map(d => ({ d: d, name: series[k].name, cx: sx(d.x), cy: sy(d[key]) }));
        if (shown.length <= 400) for (const p of ps) p.c = el("circle", { class: "pt " + c, cx: p.cx, cy: p.cy, r: 2.5 }, svg);
        pts.push(...ps);
      });
      guide = el("line", { class: "guide", y1: T, y2: H - B, x1: -10, x2: -10 }, svg);
    }

    function toSvg(ev) {
      const r = svg.getBoundingClientRect();
      return (ev.clientX - r.left) * W / r.width;
    }
    function toSvgY(ev) {
      const r = svg.getBoundingClientRect();
      return (ev.clientY - r.top) * H / r.height;
    }
    // nearest is the point nearest the pointer: by step, then by value
    // among the experiments' points at that step.
    function nearest(px, py) {
      let best = null;
      for (const p of pts) {
        const dx = Math.abs(p.cx - px) - (best ? Math.abs(best.cx - px) : Infinity);
        if (dx < -1e-9 || (Math.abs(dx) <= 1e-9 && Math.abs(p.cy - py) < Math.abs(best.cy - py))) best = p;
      }
      return best;
    }
    // stepURL is the page of the point's step (of its experiment).
    function stepURL(p) {
      return "/step?batch=" + encodeURIComponent(p.d.batch) + (series.length > 1 ? "&experiment=" + encodeURIComponent(p.name) : "");
    }
    let drag = null, brush = null, hot = null;
    svg.addEventListener("mousemove", ev => {
      const px = toSvg(ev);
      if (drag !== null) {
        if (!brush) brush = el("rect", { class: "brush", y: T, height: H - T - B }, svg);
        brush.setAttribute("x", Math.min(drag, px));
        brush.setAttribute("width", Math.abs(px - drag));
      }
      const p = nearest(px, toSvgY(ev));
      if (hot && hot.c) hot.c.classList.remove("hot");
      hot = p;
      if (!p) return;
      if (p.c) p.c.classList.add("hot");
      guide.setAttribute("x1", p.cx);
      guide.setAttribute("x2", p.cx);
      guide.classList.add("on");
      tip.style.display = "block";
      tip.textContent = (series.length > 1 ? p.name + " · " : "") + "step " + p.d.batch + ": " + key + " = " + fmt(p.d[key]);
      const r = svg.getBoundingClientRect();
      tip.style.left = Math.min(p.cx * r.width / W + 14, r.width - 160) + "px";
      tip.style.top = (p.cy * r.height / H + 20) + "px";
    });
    svg.addEventListener("mouseleave", () => { tip.style.display = "none"; if (guide) guide.classList.remove("on"); drag = null; if (brush) { brush.remove(); brush = null; } });
    svg.addEventListener("mousedown", ev => { drag = toSvg(ev); ev.preventDefault(); });
    svg.addEventListener("mouseup", ev => {
      const px = toSvg(ev), start = drag;
      drag = null;
      if (brush) { brush.remove(); brush = null; }
      if (start !== null && Math.abs(px - start) > 6 && pts.length > 1) {
        const inv = v => pts.reduce((best, p) => Math.abs(p.cx - v) < Math.abs(best.cx - v) ? p : best).d.x;
        const lo = inv(Math.min(start, px)), hi = inv(Math.max(start, px));
        if (hi > lo) state.zoom([lo, hi]);
        return;
      }
      const p = nearest(px, toSvgY(ev));
      if (p) location.href = stepURL(p);
    });
    svg.addEventListener("dblclick", () => state.zoom(state.full));
    return draw;
  }

  function curves() {
    const src = document.getElementById("curve-data");
    const box = document.getElementById("plots");
    if (!src || !box) return;
    const data = JSON.parse(src.textContent);
    if (!data.length) { box.textContent = "No explore steps."; return; }
    // One series per experiment, in the data's order (by experiment).
    const series = [];
    for (const d of data) {
      if (!series.length || series[series.length - 1].name !== d.experiment) series.push({ name: d.experiment, steps: [] });
      series[series.length - 1].steps.push(d);
    }
    if (series.length > 1) legend(box, series);
    const full = [Math.min(...data.map(d => d.x)), Math.max(...data.map(d => d.x))];
    const draws = [];
    const state = { dom: full, full: full, zoom: dom => { state.dom = dom; draws.forEach(f => f()); box.dataset.range = dom.join("-"); } };
    const plots = [
      ["Mean reward", "reward_mean"], ["Reward std (over rows)", "reward_std"], ["Mean advantage", "adv_mean"],
      ["Mean entropy (response tokens)", "entropy_mean"], ["Mean response length (tokens)", "length_mean"],
      ["Filtered share (dropped rollouts)", "filtered_share"], ["Dropped groups", "dropped_groups"],
    ];
    for (const [title, key] of plots) {
      if (!data.some(d => d[key] !== null && d[key] !== undefined)) continue;
      if ((key === "dropped_groups" || key === "filtered_share") && !data.some(d => d[key] > 0)) continue;
      draws.push(chart(box, title, key, series, state));
    }
    box.dataset.range = full.join("-");
    draws.forEach(f => f());
    const reset = document.getElementById("reset-zoom");
    if (reset) reset.addEventListener("click", () => state.zoom(full));
  }

  // legend names the experiments' colours above the plots.
  function legend(box, series) {
    const div = document.createElement("div");
    div.className = "legend";
    div.id = "legend";
    series.forEach((s, k) => {
      const item = document.createElement("span");
      item.className = "key c" + (k % 6);
      item.textContent = s.name;
      div.appendChild(item);
    });
    box.parentNode.insertBefore(div, box);
  }

  function colourSelect() {
    const sel = document.getElementById("color");
    if (sel) sel.addEventListener("change", () => sel.form.submit());
  }

  document.addEventListener("DOMContentLoaded", () => { curves(); colourSelect(); });
})();
