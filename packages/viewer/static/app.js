// `flowgrpo view`'s page: polls the server every second for new metrics lines and rollouts files
// (the run may still be training), draws the curves with uPlot (steps with a raised alarm marked
// by red lines), lists the steps and a step's rollouts (filtered by reward, role, error), and
// shows the selected rollout token by token (tokens.js colours it), or its group side by side.
// The selection lives in the URL's hash (#step=…&traj=…&colour=…), so a view can be shared.
(() => {
  const $ = (sel) => document.querySelector(sel);
  const CHARTS = [
    ['reward', ['reward', 'eval/reward', 'accuracy', 'eval/accuracy']],
    ['loss', ['loss', 'eval_loss']],
    ['entropy', ['entropy']],
    ['tool calls / trajectory', ['tools/calls_per_trajectory']],
    ['completion length', ['completions/mean_length']],
    ['truncated share', ['completions/clipped_ratio']],
    ['clip ratio', ['clip_ratio/region_mean']],
    ['logprob mismatch', ['logprob_mismatch/mean']],
    ['grad norm', ['grad_norm']],
    ['zero-variance groups', ['frac_reward_zero_std']],
  ];
  const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];

  const state = { metrics: [], rolloutSteps: [], summaries: [], charts: new Map() };
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

  // --- metrics, curves and alarms ---------------------------------------------------------
  const isEval = (r) => Object.keys(r).every((k) => k === 'step' || k.startsWith('eval/'));
  /** Steps where some alarm was raised, and the alarms raised at the last step. */
  function alarmSteps() {
    const steps = new Set();
    let last = {};
    for (const r of state.metrics) {
      if (isEval(r)) continue;
      last = r;
      for (const [k, v] of Object.entries(r))
        if (/^alarms\/[^/]+$/.test(k) && v === 1) steps.add(r.step);
    }
    const raised = Object.keys(last)
      .filter((k) => /^alarms\/[^/]+$/.test(k) && last[k] === 1)
      .map((k) => ({ name: k.slice(7), value: last[`${k}/value`] }));
    return { steps, raised, lastStep: last.step };
  }
  function renderAlarms() {
    const { raised, lastStep } = alarmSteps();
    $('#alarms').innerHTML = raised
      .map(
        (a) =>
          `<div class="alarm" data-alarm="${esc(a.name)}">⚠ alarm <b>${esc(a.name)}</b> at step ${esc(lastStep)}` +
          `${a.value === undefined ? '' : ` (value ${num(a.value)})`} — see docs/guides/alarms.md</div>`,
      )
      .join('');
  }
  function chartData(keys) {
    const steps = [...new Set(state.metrics.map((r) => Number(r.step)))].sort((a, b) => a - b);
    const at = new Map(steps.map((s, i) => [s, i]));
    const cols = keys.map(() => steps.map(() => null));
    for (const r of state.metrics)
      keys.forEach((k, j) => {
        if (typeof r[k] === 'number') cols[j][at.get(Number(r.step))] = r[k];
      });
    return [steps, ...cols];
  }
  const alarmLines = {
    hooks: {
      draw: [
        (u) => {
          const { steps } = alarmSteps();
          const ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = 'rgba(220,0,0,0.6)';
          ctx.lineWidth = 2;
          for (const s of steps) {
            const x = u.valToPos(s, 'x', true);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
          }
          ctx.restore();
        },
      ],
    },
  };
  function renderCharts() {
    for (const [title, allKeys] of CHARTS) {
      const keys = allKeys.filter((k) => state.metrics.some((r) => typeof r[k] === 'number'));
      if (keys.length === 0) continue;
      const id = `${title}|${keys.join(',')}`;
      const data = chartData(keys);
      const have = state.charts.get(title);
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
          height: 180,
          scales: { x: { time: false } },
          // Small values (a loss near 0, a mismatch of 1e-6) keep their significant digits.
          axes: [{}, { values: (_u, vals) => vals.map((v) => Number(v.toPrecision(3))) }],
          series: [
            { label: 'step' },
            ...keys.map((k, i) => ({
              label: k,
              stroke: COLOURS[i % 4],
              spanGaps: true,
              points: { show: true, size: 4 },
            })),
          ],
          plugins: [alarmLines],
        },
        data,
        el,
      );
      state.charts.set(title, { id, plot, el });
    }
  }

  // --- steps and rollouts --------------------------------------------------------------------
  function renderSteps() {
    const { steps: alarmed } = alarmSteps();
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
    }
  }
  function passes(t, h) {
    if (h.reward === 'pos' && !(t.reward > 0)) return false;
    if (h.reward === 'zero' && t.reward > 0) return false;
    if (h.role && !t.roles.includes(h.role)) return false;
    if (h.error === '1' && !t.error) return false;
    return true;
  }
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
          `<td>${num(t.reward)}</td><td>${num(t.advantage)}</td><td>${esc(t.stopReason)}</td>` +
          `<td>${t.error ? esc(t.error.code) : ''}</td></tr>`,
      )
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
      s.onclick = () => selectStep(Number(s.dataset.step), s.dataset.index);
  }

  let loadedStep;
  async function selectStep(step, traj = '') {
    setHash({ step, traj });
  }
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
      const run = await get('/api/run');
      $('#run').textContent = run.dir;
      const changed = run.rollouts.length !== state.rolloutSteps.length || m.records.length > 0;
      state.rolloutSteps = run.rollouts;
      if (changed) {
        renderAlarms();
        renderCharts();
        if (hash().step === undefined && run.rollouts.length > 0)
          setHash({ step: run.rollouts.at(-1) });
        else render();
      }
      $('#live').classList.remove('stale');
    } catch {
      $('#live').classList.add('stale');
    }
    setTimeout(poll, 1000);
  }

  // --- controls and keys ---------------------------------------------------------------------
  for (const c of window.flowgrpoColourings) $('#colour').append(new Option(c, c));
  $('#colour').onchange = (e) => setHash({ colour: e.target.value });
  $('#group-view').onchange = (e) => setHash({ group: e.target.checked ? '1' : '' });
  $('#f-reward').onchange = (e) => setHash({ reward: e.target.value });
  $('#f-role').onchange = (e) => setHash({ role: e.target.value });
  $('#f-error').onchange = (e) => setHash({ error: e.target.checked ? '1' : '' });
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
