// `flowgrpo view`'s page: polls the server every second for new metrics lines, alarm episodes and
// rollouts files (the run may still be training), draws the curves with uPlot (one red band per
// alarm episode on the charts it concerns), lists the alarm episodes, the steps and a step's
// rollouts (filtered by reward, role, error; stop reasons explained), and shows the selected
// rollout token by token (tokens.js colours it), or its group side by side. It opens on the latest
// step's first rollout. The selection lives in the URL's hash (#step=…&traj=…&colour=…), so a
// view can be shared.
(() => {
  const $ = (sel) => document.querySelector(sel);
  const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf'];

  const state = {
    metrics: [],
    skipped: 0,
    charts: [],
    episodes: [],
    run: undefined,
    rolloutSteps: [],
    summaries: [],
    plots: new Map(),
  };
  const hash = () => Object.fromEntries(new URLSearchParams(location.hash.slice(1)));
  function setHash(patch) {
    const h = { ...hash(), ...patch };
    for (const k of Object.keys(h)) if (h[k] === '' || h[k] === undefined) delete h[k];
    history.replaceState(null, '', `#${new URLSearchParams(h)}`);
    render();
  }
  const get = async (url) => {
    const r = await fetch(url, { cache: 'no-store' });
    if (!r.ok) throw new Error(`${url}: ${r.status}`);
    return r.json();
  };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const num = (x) => (x === null || x === undefined ? '–' : Number(x.toPrecision(4)));

  // --- notices: metrics lines skipped, tokens without a tokenizer -----------------------------
  function renderNotices() {
    const out = [];
    if (state.skipped > 0)
      out.push(
        `<div class="notice" data-notice="skipped">metrics.jsonl: ${state.skipped} line${state.skipped === 1 ? '' : 's'} skipped ` +
          '(not a JSON object with a numeric "step": torn by a kill, or written by something else); every other line is shown</div>',
      );
    const tok = state.run?.tokenizer;
    if (tok?.missing)
      out.push(
        '<div class="notice" data-notice="tokenizer">Tokens are shown as ⟨id⟩: no tokenizer.json found for this run. Looked in: ' +
          tok.missing.map((t) => `${esc(t.from)} (${esc(t.path)}: ${esc(t.reason)})`).join('; ') +
          '. Copy the model’s tokenizer.json into the newest checkpoint, or record "tokenizer" in config.json.</div>',
      );
    $('#notices').innerHTML = out.join('');
    $('#tokenizer').textContent = tok?.path ? `tokens: ${tok.path}` : '';
    $('#tokenizer').title = tok?.from ? `named by ${tok.from}` : '';
  }

  // --- alarm episodes -------------------------------------------------------------------------
  const stepsText = (e) => (e.from === e.to ? `step ${e.from}` : `steps ${e.from}–${e.to}`);
  function renderAlarms() {
    const list = state.episodes;
    $('#alarms').hidden = list.length === 0;
    $('#alarms-count').textContent = `${list.length} alarm episode${list.length === 1 ? '' : 's'}`;
    $('#alarms-list').innerHTML = list
      .map(
        (e) =>
          `<li class="alarm${e.open ? ' open' : ''}" data-alarm="${esc(e.name)}" data-from="${e.from}" data-to="${e.to}">` +
          `⚠ <b>${esc(e.name)}</b> · ${stepsText(e)}${e.open ? ' <span class="still">still raised</span>' : ''}` +
          `${e.value === undefined ? '' : ` · value ${num(e.value)}`}` +
          `: ${esc(e.meaning ?? 'an alarm this viewer does not know; see docs/guides/alarms.md')}` +
          `${e.advice ? `. <span class="advice">What to do: ${esc(e.advice)}.</span>` : ''}</li>`,
      )
      .join('');
  }
  /** Steps inside some alarm episode. */
  function alarmedSteps() {
    const steps = new Set();
    for (const e of state.episodes)
      for (const s of state.rolloutSteps) if (s >= e.from && s <= e.to) steps.add(s);
    return steps;
  }

  // --- curves ---------------------------------------------------------------------------------
  function chartData(keys) {
    const steps = [...new Set(state.metrics.map((r) => r.step))].sort((a, b) => a - b);
    const at = new Map(steps.map((s, i) => [s, i]));
    const cols = keys.map(() => steps.map(() => null));
    for (const r of state.metrics)
      keys.forEach((k, j) => {
        if (typeof r[k] === 'number') cols[j][at.get(r.step)] = r[k];
      });
    return [steps, ...cols];
  }
  // The value axis fits the data: uPlot's own padding for a series that varies, and for a
  // constant one (uPlot would draw 0 on a 0–100 axis) ±10% of its value, or ±1 around 0.
  function yRange(_u, min, max) {
    if (min === null || max === null) return [0, 1];
    if (min === max) {
      const d = Math.abs(min) * 0.1 || 1;
      return [min - d, max + d];
    }
    return uPlot.rangeNum(min, max, 0.1, true);
  }
  // The value axis as wide as its longest label (a fixed width cut "3.4e-7" to ".4e-7").
  function axisSize(self, values, axisIdx, cycleNum) {
    const axis = self.axes[axisIdx];
    if (cycleNum > 1) return axis._size;
    let size = axis.ticks.size + axis.gap;
    const longest = (values ?? []).reduce(
      (a, v) => (String(v).length > a.length ? String(v) : a),
      '',
    );
    if (longest) {
      self.ctx.font = axis.font[0];
      size += self.ctx.measureText(longest).width / devicePixelRatio;
    }
    return Math.ceil(size) + 4;
  }
  /**
   * One translucent red band per alarm episode on this chart, labelled with the alarm's name. The
   * chart's element says in words what its canvas shows: data-bands (name:from-to of each band)
   * and data-y (the value axis's range).
   */
  const alarmBands = (title) => ({
    hooks: {
      setScale: [
        (u, key) => {
          if (key === 'y') u.root.parentNode.dataset.y = `${u.scales.y.min},${u.scales.y.max}`;
        },
      ],
      drawClear: [
        (u) => {
          const xs = u.data[0];
          const gaps = xs.slice(1).map((x, i) => x - xs[i]);
          const half = gaps.length ? Math.min(...gaps) / 2 : 0.5;
          const { left, top, width, height } = u.bbox;
          const ctx = u.ctx;
          ctx.save();
          ctx.font = `${Math.round(10 * devicePixelRatio)}px system-ui, sans-serif`;
          let labelEnd = -Infinity;
          const drawn = [];
          for (const e of state.episodes) {
            if (!e.charts.includes(title)) continue;
            const x0 = Math.max(left, u.valToPos(e.from - half, 'x', true));
            const x1 = Math.min(left + width, u.valToPos(e.to + half, 'x', true));
            if (x1 <= x0) continue;
            drawn.push(`${e.name}:${e.from}-${e.to}`);
            ctx.fillStyle = 'rgba(220,0,0,0.12)';
            ctx.fillRect(x0, top, x1 - x0, height);
            ctx.fillStyle = 'rgba(220,0,0,0.6)';
            ctx.fillRect(x0, top, Math.max(1, devicePixelRatio), height);
            const w = ctx.measureText(e.name).width;
            if (x0 + 3 > labelEnd) {
              ctx.fillStyle = '#a00';
              ctx.fillText(e.name, x0 + 3, top + 12 * devicePixelRatio);
              labelEnd = x0 + 3 + w + 6;
            }
          }
          ctx.restore();
          u.root.parentNode.dataset.bands = drawn.join(' ');
        },
      ],
    },
  });
  function renderCharts() {
    const wanted = new Set(state.charts.map((c) => c.title));
    for (const [title, have] of state.plots)
      if (!wanted.has(title)) {
        have.plot.destroy();
        have.el.remove();
        state.plots.delete(title);
      }
    for (const { title, keys } of state.charts) {
      const id = keys.join(',');
      const data = chartData(keys);
      const have = state.plots.get(title);
      if (have && have.id === id) {
        have.plot.setData(data);
        continue;
      }
      if (have) have.plot.destroy();
      const el = have?.el ?? document.createElement('div');
      el.className = 'chart';
      el.dataset.chart = title;
      if (!have) $('#charts').append(el);
      const plot = new uPlot(
        {
          title,
          width: 330,
          height: 190,
          scales: { x: { time: false }, y: { range: yRange } },
          // Small values (a loss near 0, a mismatch of 1e-6) keep their significant digits.
          axes: [
            {},
            { size: axisSize, values: (_u, vals) => vals.map((v) => Number(v.toPrecision(3))) },
          ],
          series: [
            { label: 'step' },
            ...keys.map((k, i) => ({
              label: k,
              stroke: COLOURS[i % COLOURS.length],
              spanGaps: true,
              points: { show: true, size: 4 },
            })),
          ],
          plugins: [alarmBands(title)],
        },
        data,
        el,
      );
      state.plots.set(title, { id, plot, el });
    }
    // Charts keep the order of the list, new ones included.
    for (const { title } of state.charts) $('#charts').append(state.plots.get(title).el);
  }

  // --- steps and rollouts --------------------------------------------------------------------
  function renderSteps() {
    const alarmed = alarmedSteps();
    const sel = Number(hash().step);
    const list = $('#steps');
    const have = new Set([...list.children].map((li) => Number(li.dataset.step)));
    for (const s of state.rolloutSteps)
      if (!have.has(s)) {
        const li = document.createElement('li');
        li.dataset.step = s;
        li.textContent = `step ${s}`;
        li.onclick = () => setHash({ step: s, traj: '' });
        list.append(li);
      }
    for (const li of list.children) {
      const s = Number(li.dataset.step);
      li.classList.toggle('sel', s === sel);
      li.classList.toggle('alarm', alarmed.has(s));
      li.title = alarmed.has(s) ? 'inside an alarm episode' : '';
    }
  }
  function passes(t, h) {
    if (h.reward === 'pos' && !(t.reward > 0)) return false;
    if (h.reward === 'zero' && t.reward > 0) return false;
    if (h.role && !t.roles.includes(h.role)) return false;
    if (h.error === '1' && !t.error) return false;
    return true;
  }
  const stopTitle = (reason) => {
    const help = state.run?.stopReasons?.[reason];
    return help ? `${reason}: ${help.meaning}. Look at: ${help.look}.` : reason;
  };
  function renderRollouts() {
    const h = hash();
    const roles = new Set(state.summaries.flatMap((t) => t.roles));
    const roleSel = $('#f-role');
    const known = new Set([...roleSel.options].map((o) => o.value));
    for (const r of roles) if (!known.has(r)) roleSel.append(new Option(r, r));
    roleSel.value = h.role ?? '';
    $('#f-reward').value = h.reward ?? '';
    $('#f-error').checked = h.error === '1';
    $('#group-view').checked = h.group === '1';
    $('#rollouts tbody').innerHTML = state.summaries
      .filter((t) => passes(t, h))
      .map(
        (t) =>
          `<tr data-index="${t.index}" class="${String(t.index) === h.traj ? 'sel' : ''} ${t.error ? 'err' : ''}">` +
          `<td>${t.index}</td><td>${esc(t.groupId)}</td><td class="q">${esc(t.question ?? t.queryId)}</td>` +
          `<td class="a">${esc(t.answer)}</td><td>${num(t.reward)}</td><td>${num(t.advantage)}</td>` +
          `<td class="stop" title="${esc(stopTitle(t.stopReason))}">${esc(t.stopReason)}</td>` +
          `<td>${t.error ? esc(t.error.code) : ''}</td></tr>`,
      )
      .join('');
    // The stop reasons of this step, each explained once under the table.
    const reasons = [...new Set(state.summaries.map((t) => t.stopReason))].sort();
    $('#stop-legend').innerHTML = reasons
      .map((r) => {
        const help = state.run?.stopReasons?.[r];
        return (
          `<li data-stop="${esc(r)}"><b>${esc(r)}</b>: ${esc(help?.meaning ?? 'no description')}` +
          `${help ? `. <span class="look">Look at: ${esc(help.look)}.</span>` : ''}</li>`
        );
      })
      .join('');
  }
  let detailKey = '';
  async function renderDetail() {
    const h = hash();
    const t = state.summaries.find((s) => String(s.index) === h.traj);
    const colour = h.colour ?? 'advantage';
    $('#colour').value = colour;
    const detail = $('#detail');
    if (!t) {
      detail.innerHTML = '';
      detailKey = '';
      return;
    }
    const indices =
      h.group === '1'
        ? state.summaries.filter((s) => s.groupId === t.groupId).map((s) => s.index)
        : [t.index];
    const key = `${h.step}/${indices.join(',')}`;
    if (key !== detailKey) {
      detailKey = key;
      const { html } = await get(`/api/steps/${h.step}/${indices.join(',')}`);
      if (detailKey !== key) return;
      detail.className = h.group === '1' ? 'group' : '';
      detail.innerHTML = html.join('');
    }
    window.flowgrpoPaint(detail, colour);
    // In the group view, the selected rollout among its group.
    for (const a of detail.querySelectorAll('.traj'))
      a.classList.toggle('sel', a.dataset.index === String(t.index));
  }
  async function renderAcross() {
    const h = hash();
    const t = state.summaries.find((s) => String(s.index) === h.traj);
    if (!t || h.across !== '1') {
      $('#across').innerHTML = '';
      return;
    }
    const rows = await get(`/api/question/${encodeURIComponent(t.queryId)}`);
    $('#across').innerHTML =
      `this question across steps: ` +
      rows
        .map(
          (r) =>
            `<span data-step="${r.step}" data-index="${r.index}">step ${r.step} #${r.index}: reward ${num(r.reward)}</span>`,
        )
        .join('');
    for (const s of $('#across').querySelectorAll('span'))
      s.onclick = () => setHash({ step: Number(s.dataset.step), traj: s.dataset.index });
  }

  let loadedStep;
  async function render() {
    const h = hash();
    renderSteps();
    if (h.step !== undefined && Number(h.step) !== loadedStep) {
      loadedStep = Number(h.step);
      try {
        state.summaries = await get(`/api/steps/${h.step}`);
      } catch {
        state.summaries = [];
      }
    }
    // A step without a selected rollout opens on its first one (of those the filters show).
    if (h.traj === undefined) {
      const first = state.summaries.find((t) => passes(t, h));
      if (first) return setHash({ traj: String(first.index) });
    }
    renderRollouts();
    await renderDetail();
    await renderAcross();
  }

  // --- live polling --------------------------------------------------------------------------
  async function poll() {
    try {
      const m = await get(`/api/metrics?from=${state.metrics.length}`);
      // metrics.jsonl cut back (a resumed run): read it again from the start.
      if (m.total < state.metrics.length) state.metrics = (await get('/api/metrics')).records;
      else state.metrics.push(...m.records);
      const grew = m.records.length > 0 || m.skipped !== state.skipped;
      state.skipped = m.skipped;
      state.charts = m.charts;
      const episodes = await get('/api/alarms');
      // (Read after the metrics: a line appended in between is in the episodes a poll early.)
      const alarmsChanged = JSON.stringify(episodes) !== JSON.stringify(state.episodes);
      state.episodes = episodes;
      state.run = await get('/api/run');
      $('#run').textContent = state.run.dir;
      document.title = `flowgrpo view — ${state.run.dir.split(/[\\/]/).at(-1)}`;
      renderNotices();
      const changed =
        state.run.rollouts.length !== state.rolloutSteps.length || grew || alarmsChanged;
      state.rolloutSteps = state.run.rollouts;
      $('#no-rollouts').hidden = state.rolloutSteps.length > 0;
      if (changed) {
        renderAlarms();
        renderCharts();
        if (hash().step === undefined && state.rolloutSteps.length > 0)
          setHash({ step: state.rolloutSteps.at(-1) });
        else await render();
      }
      $('#live').classList.remove('stale');
      $('#live').title = 'polls the run directory every second';
    } catch (e) {
      $('#live').classList.add('stale');
      $('#live').title = `the last poll failed: ${e.message}`;
    }
    setTimeout(poll, 1000);
  }

  // --- controls and keys ---------------------------------------------------------------------
  for (const c of window.flowgrpoColourings) $('#colour').append(new Option(c, c));
  $('#colour').onchange = (e) => setHash({ colour: e.target.value });
  $('#group-view').onchange = (e) => setHash({ group: e.target.checked ? '1' : '' });
  $('#f-reward').onchange = (e) => setHash({ reward: e.target.value, traj: '' });
  $('#f-role').onchange = (e) => setHash({ role: e.target.value, traj: '' });
  $('#f-error').onchange = (e) => setHash({ error: e.target.checked ? '1' : '', traj: '' });
  $('#rollouts tbody').onclick = (e) => {
    const tr = e.target.closest('tr');
    if (tr) setHash({ traj: tr.dataset.index });
  };
  window.addEventListener('hashchange', render);
  document.addEventListener('keydown', (e) => {
    if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement) return;
    const h = hash();
    const rows = [...document.querySelectorAll('#rollouts tbody tr')].map((r) => r.dataset.index);
    const at = rows.indexOf(h.traj);
    const steps = state.rolloutSteps;
    const si = steps.indexOf(Number(h.step));
    if (e.key === 'j' && rows.length) setHash({ traj: rows[Math.min(rows.length - 1, at + 1)] });
    else if (e.key === 'k' && rows.length) setHash({ traj: rows[Math.max(0, at - 1)] });
    else if (e.key === ']' && si < steps.length - 1) setHash({ step: steps[si + 1], traj: '' });
    else if (e.key === '[' && si > 0) setHash({ step: steps[si - 1], traj: '' });
    else if (e.key === 'c') {
      const cs = window.flowgrpoColourings;
      setHash({ colour: cs[(cs.indexOf(h.colour ?? 'advantage') + 1) % cs.length] });
    } else if (e.key === 'g') setHash({ group: h.group === '1' ? '' : '1' });
    else if (e.key === 'q') setHash({ across: h.across === '1' ? '' : '1' });
    else if (e.key === '?') $('#help-box').hidden = !$('#help-box').hidden;
  });
  poll();
})();
