(function () {
  'use strict';
  var status = { panels: 0, charts: 0, chartsWithData: 0, stats: 0, tables: 0, errors: [] };
  function report() {
    var el = document.getElementById('bw-status');
    if (!el) return;
    el.setAttribute('data-panels', status.panels);
    el.setAttribute('data-charts', status.charts);
    el.setAttribute('data-charts-with-data', status.chartsWithData);
    el.setAttribute('data-errors', status.errors.length);
    el.textContent = JSON.stringify(status);
  }
  window.addEventListener('error', function (e) { status.errors.push(String(e.message)); report(); });

  var MODEL = JSON.parse(document.getElementById('bw-model').textContent);
  var charts = [];
  var zoom = null;  // [xmin, xmax] shared by every chart of the page, or null

  // -- number formatting ------------------------------------------------------
  function short(v, d) {
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(2) + ' G';
    if (a >= 1e6) return (v / 1e6).toFixed(2) + ' M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + ' K';
    if (d !== undefined) return v.toFixed(d);
    if (a >= 100 || v === Math.round(v)) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    return v.toPrecision(2);
  }
  function fmt(v, unit) {
    if (v === null || v === undefined || isNaN(v)) return '—';
    switch (unit) {
      case 's':
        var a = Math.abs(v);
        if (a === 0) return '0 s';
        if (a < 1e-3) return short(v * 1e6) + ' µs';
        if (a < 1) return short(v * 1e3) + ' ms';
        return short(v) + ' s';
      case 'ms': return short(v) + ' ms';
      case 'reqps': return short(v) + ' /s';
      case 'tps': return short(v) + ' tps';
      case 'percentunit': return short(v * 100) + '%';
      case 'percent': return short(v) + '%';
      case 'bytes':
        var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
        while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
        return short(v) + ' ' + u[i];
      default: return short(v);
    }
  }
  function pad(n) { return (n < 10 ? '0' : '') + n; }
  function fmtX(x, mode, span) {
    if (mode === 'time') {
      var d = new Date(x);
      var s = pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds());
      return span < 5000 ? s + '.' + String(d.getUTCMilliseconds() + 1000).slice(1) : s;
    }
    if (mode === 'seconds') return short(x) + ' s';
    return short(x);
  }

  // -- axis ticks ---------------------------------------------------------------
  function niceStep(range, n) {
    var raw = range / Math.max(n, 1), mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  }
  function ticks(min, max, n, mode) {
    var step;
    if (mode === 'time') {
      var steps = [100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000,
                   1800000, 3600000, 7200000, 21600000, 43200000, 86400000];
      step = steps[steps.length - 1];
      for (var i = 0; i < steps.length; i++) { if ((max - min) / steps[i] <= n) { step = steps[i]; break; } }
    } else {
      step = niceStep(max - min, n);
    }
    var out = [], t = Math.ceil(min / step) * step;
    for (; t <= max + step * 1e-9; t += step) out.push(t);
    return out;
  }

  // -- the chart ----------------------------------------------------------------
  function Chart(panelEl, spec) {
    this.spec = spec;
    this.plot = panelEl.querySelector('.bw-plot');
    this.canvas = document.createElement('canvas');
    this.plot.appendChild(this.canvas);
    this.tip = document.createElement('div');
    this.tip.className = 'bw-tip';
    panelEl.appendChild(this.tip);
    this.hidden = {};
    this.hover = null;
    this.drag = null;
    this.hasData = spec.series.some(function (s) { return s.pts.some(function (p) { return p[1] !== null; }); });
    if (!this.hasData) {
      var nd = document.createElement('div');
      nd.className = 'bw-nodata';
      nd.textContent = 'No data';
      this.plot.appendChild(nd);
    }
    this.legend(panelEl.querySelector('.bw-legend'));
    this.listen();
  }
  Chart.prototype.legend = function (el) {
    var self = this;
    this.spec.series.forEach(function (s, i) {
      var item = document.createElement('span');
      item.innerHTML = '<i style="background:' + s.color + '"></i>';
      item.appendChild(document.createTextNode(s.name));
      item.addEventListener('click', function () {
        self.hidden[i] = !self.hidden[i];
        item.className = self.hidden[i] ? 'off' : '';
        self.draw();
      });
      el.appendChild(item);
    });
  };
  Chart.prototype.xrange = function () {
    if (zoom && this.spec.xmode === MODEL.zoomMode) return zoom;
    return [this.spec.xmin, this.spec.xmax];
  };
  Chart.prototype.layout = function () {
    var w = this.plot.clientWidth, h = this.plot.clientHeight, dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.max(1, Math.round(w * dpr));
    this.canvas.height = Math.max(1, Math.round(h * dpr));
    this.canvas.style.width = w + 'px';
    this.canvas.style.height = h + 'px';
    this.dpr = dpr; this.w = w; this.h = h;
    this.area = { l: 62, r: 10, t: 6, b: 20 };
  };
  Chart.prototype.yrange = function (x0, x1) {
    var lo = Infinity, hi = -Infinity, self = this;
    this.spec.series.forEach(function (s, i) {
      if (self.hidden[i]) return;
      s.pts.forEach(function (p) {
        if (p[1] === null || p[0] < x0 || p[0] > x1) return;
        if (p[1] < lo) lo = p[1];
        if (p[1] > hi) hi = p[1];
      });
    });
    if (lo === Infinity) { lo = 0; hi = 1; }
    if (this.spec.min0 && lo > 0) lo = 0;
    if (hi === lo) hi = lo + (Math.abs(lo) || 1);
    return [lo, hi + (hi - lo) * 0.05];
  };
  Chart.prototype.px = function (x) { var r = this.xr, a = this.area; return a.l + (x - r[0]) / (r[1] - r[0]) * (this.w - a.l - a.r); };
  Chart.prototype.py = function (y) { var r = this.yr, a = this.area; return this.h - a.b - (y - r[0]) / (r[1] - r[0]) * (this.h - a.t - a.b); };
  Chart.prototype.xOf = function (px) { var r = this.xr, a = this.area; return r[0] + (px - a.l) / (this.w - a.l - a.r) * (r[1] - r[0]); };
  Chart.prototype.draw = function () {
    this.layout();
    var ctx = this.canvas.getContext('2d'), a = this.area, self = this, spec = this.spec;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.clearRect(0, 0, this.w, this.h);
    this.xr = this.xrange();
    this.yr = this.yrange(this.xr[0], this.xr[1]);
    var x0 = this.xr[0], x1 = this.xr[1], top = a.t, bottom = this.h - a.b;
    ctx.save();
    ctx.beginPath();
    ctx.rect(a.l, top, this.w - a.l - a.r, bottom - top);
    ctx.clip();
    (spec.regions || []).forEach(function (g) {
      if (g.to < x0 || g.from > x1) return;
      var l = self.px(g.from), r = Math.max(self.px(g.to), l + 1);
      ctx.globalAlpha = g.alpha || 0.14;
      ctx.fillStyle = g.color;
      ctx.fillRect(l, top, r - l, bottom - top);
      ctx.globalAlpha = 1;
      ctx.fillRect(l, bottom - 3, r - l, 3);
    });
    ctx.restore();
    ctx.font = '11px "DejaVu Sans", Arial, sans-serif';
    ctx.fillStyle = '#5b6169';
    ctx.strokeStyle = '#e6e8eb';
    ctx.lineWidth = 1;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    ticks(this.yr[0], this.yr[1], Math.max(2, Math.floor((bottom - top) / 28)), 'linear').forEach(function (t) {
      var y = Math.round(self.py(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(a.l, y); ctx.lineTo(self.w - a.r, y); ctx.stroke();
      ctx.fillText(fmt(t, spec.unit), a.l - 4, y);
    });
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ticks(x0, x1, Math.max(2, Math.floor((this.w - a.l - a.r) / 90)), spec.xmode === 'time' ? 'time' : 'linear').forEach(function (t) {
      var x = Math.round(self.px(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
      ctx.fillText(fmtX(t, spec.xmode, x1 - x0), x, bottom + 4);
    });
    ctx.save();
    ctx.beginPath();
    ctx.rect(a.l, top - 2, this.w - a.l - a.r, bottom - top + 4);
    ctx.clip();
    spec.series.forEach(function (s, i) {
      if (self.hidden[i]) return;
      ctx.strokeStyle = s.color;
      ctx.fillStyle = s.color;
      ctx.lineWidth = s.width || 1.5;
      ctx.beginPath();
      var pen = false, prev = null, gap = spec.gap || Infinity;
      s.pts.forEach(function (p) {
        if (p[1] === null) { pen = false; prev = null; return; }
        var x = self.px(p[0]), y = self.py(p[1]);
        if (pen && prev !== null && p[0] - prev <= gap) ctx.lineTo(x, y); else ctx.moveTo(x, y);
        pen = true; prev = p[0];
      });
      ctx.stroke();
      if (spec.points || s.pts.length === 1) {
        s.pts.forEach(function (p) {
          if (p[1] === null) return;
          ctx.beginPath(); ctx.arc(self.px(p[0]), self.py(p[1]), 3, 0, 2 * Math.PI); ctx.fill();
        });
      }
    });
    ctx.restore();
    ctx.strokeStyle = '#c4c9d0';
    ctx.strokeRect(a.l + 0.5, top + 0.5, this.w - a.l - a.r - 1, bottom - top - 1);
    if (this.hover !== null && this.hover >= x0 && this.hover <= x1) {
      var hx = Math.round(this.px(this.hover)) + 0.5;
      ctx.strokeStyle = '#e02f44';
      ctx.beginPath(); ctx.moveTo(hx, top); ctx.lineTo(hx, bottom); ctx.stroke();
    }
    if (this.drag && this.drag.now !== undefined) {
      ctx.fillStyle = 'rgba(31,120,193,.15)';
      var l = Math.min(this.drag.from, this.drag.now), r = Math.max(this.drag.from, this.drag.now);
      ctx.fillRect(l, top, r - l, bottom - top);
    }
  };
  Chart.prototype.nearest = function (pts, x) {
    var lo = 0, hi = pts.length - 1;
    if (hi < 0) return null;
    while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (pts[mid][0] < x) lo = mid; else hi = mid; }
    return Math.abs(pts[lo][0] - x) <= Math.abs(pts[hi][0] - x) ? pts[lo] : pts[hi];
  };
  Chart.prototype.showTip = function (px, py) {
    var x = this.xOf(px), spec = this.spec, self = this, rows = [];
    var span = this.xr[1] - this.xr[0];
    var head = spec.xlabel ? spec.xlabel + ' ' : '';
    var html = '<b>' + head + fmtX(x, spec.xmode, spec.xmode === 'time' ? 0 : span) + '</b>';
    spec.series.forEach(function (s, i) {
      if (self.hidden[i]) return;
      var p = self.nearest(s.pts, x);
      if (!p || p[1] === null) return;
      if (spec.xmode !== 'linear' && Math.abs(p[0] - x) > (spec.gap || span)) return;
      rows.push('<br><i style="background:' + s.color + '"></i>' + s.name.replace(/&/g, '&amp;').replace(/</g, '&lt;') + ': <b>' + fmt(p[1], spec.unit) + '</b>');
    });
    (spec.regions || []).forEach(function (g) {
      if (x >= g.from && x <= g.to && g.label) {
        rows.push('<br><i style="background:' + g.color + '"></i>' + g.label.replace(/&/g, '&amp;').replace(/</g, '&lt;'));
      }
    });
    this.tip.innerHTML = html + rows.join('');
    this.tip.style.display = 'block';
    var plotBox = this.plot.getBoundingClientRect(), panelBox = this.plot.parentNode.getBoundingClientRect();
    var left = plotBox.left - panelBox.left + px + 14, tw = this.tip.offsetWidth;
    if (left + tw > panelBox.width) left = Math.max(0, plotBox.left - panelBox.left + px - tw - 14);
    this.tip.style.left = left + 'px';
    this.tip.style.top = (plotBox.top - panelBox.top + Math.max(0, py - 10)) + 'px';
  };
  Chart.prototype.listen = function () {
    var self = this, c = this.canvas;
    function pos(e) { var b = c.getBoundingClientRect(); return [e.clientX - b.left, e.clientY - b.top]; }
    c.addEventListener('mousemove', function (e) {
      var p = pos(e);
      var x = self.xOf(p[0]);
      charts.forEach(function (o) { if (o.spec.xmode === self.spec.xmode) { o.hover = x; if (o !== self) o.draw(); } });
      if (self.drag) self.drag.now = p[0];
      self.draw();
      self.showTip(p[0], p[1]);
    });
    c.addEventListener('mouseleave', function () {
      charts.forEach(function (o) { o.hover = null; o.draw(); });
      self.tip.style.display = 'none';
      self.drag = null;
    });
    c.addEventListener('mousedown', function (e) { self.drag = { from: pos(e)[0] }; e.preventDefault(); });
    c.addEventListener('mouseup', function (e) {
      if (!self.drag) return;
      var a = self.drag.from, b = pos(e)[0];
      self.drag = null;
      if (Math.abs(b - a) > 4 && self.spec.xmode === MODEL.zoomMode) {
        setZoom([self.xOf(Math.min(a, b)), self.xOf(Math.max(a, b))]);
      } else {
        self.draw();
      }
    });
    c.addEventListener('dblclick', function () { setZoom(null); });
  };
  function setZoom(z) {
    zoom = z;
    var btn = document.getElementById('bw-reset');
    if (btn) btn.style.visibility = z ? 'visible' : 'hidden';
    charts.forEach(function (o) { o.draw(); });
  }

  // -- the page -----------------------------------------------------------------
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function render() {
    var grid = document.getElementById('bw-grid');
    MODEL.panels.forEach(function (p) {
      var box;
      if (p.kind === 'row') {
        box = el('div', 'bw-row', p.title);
        box.style.gridRow = (p.y + 1) + ' / span ' + Math.max(p.h, 1);
        grid.appendChild(box);
        return;
      }
      status.panels++;
      box = el('div', 'bw-panel');
      box.style.gridColumn = (p.x + 1) + ' / span ' + p.w;
      box.style.gridRow = (p.y + 1) + ' / span ' + p.h;
      var h = el('h3', '', p.title);
      if (p.description) h.title = p.description;
      box.appendChild(h);
      box.setAttribute('data-kind', p.kind);
      grid.appendChild(box);
      if (p.kind === 'chart') {
        box.appendChild(el('div', 'bw-plot'));
        box.appendChild(el('div', 'bw-legend'));
        var chart = new Chart(box, p.chart);
        charts.push(chart);
        status.charts++;
        if (chart.hasData) { status.chartsWithData++; box.setAttribute('data-has-data', '1'); }
      } else if (p.kind === 'stat') {
        status.stats++;
        box.appendChild(el('div', 'bw-stat', p.value === null ? 'No data' : fmt(p.value, p.unit)));
        if (p.value !== null) box.setAttribute('data-has-data', '1');
      } else if (p.kind === 'table') {
        status.tables++;
        var wrap = el('div', 'bw-tablewrap'), t = el('table'), tr = el('tr');
        p.columns.forEach(function (c) { tr.appendChild(el('th', '', c)); });
        t.appendChild(tr);
        p.rows.forEach(function (r) {
          var row = el('tr');
          r.forEach(function (v, i) {
            var cell = el('td', typeof v === 'number' ? 'num' : '', typeof v === 'number' ? fmt(v, p.unit) : v);
            row.appendChild(cell);
          });
          t.appendChild(row);
        });
        wrap.appendChild(t);
        box.appendChild(wrap);
        if (p.rows.length) box.setAttribute('data-has-data', '1');
      }
    });
    charts.forEach(function (c) { c.draw(); });
    window.addEventListener('resize', function () { charts.forEach(function (c) { c.draw(); }); });
    var btn = document.getElementById('bw-reset');
    if (btn) btn.addEventListener('click', function () { setZoom(null); });
  }
  try { render(); } catch (e) { status.errors.push(String(e && e.stack || e)); }
  status.rendered = true;
  report();
})();
