// Colours the token elements of trajectory-html.ts by one of their attributes: logprob (the
// sampler's: white at 0, red towards -5 and below), advantage (green above 0, red below, full at
// |A| ≥ 1.5), trainable (blue: carries loss; masked spans stay grey). Shared by `flowgrpo view` and
// report.html: it defines window.flowgrpoPaint and changes nothing else.
(() => {
  const COLOURINGS = ['advantage', 'logprob', 'trainable'];
  function colour(by, el) {
    if (el.dataset.trainable !== '1') return '';
    if (by === 'trainable') return 'rgba(60,120,220,0.25)';
    const v = Number(el.dataset[by]);
    if (el.dataset[by] === '' || !Number.isFinite(v)) return '';
    if (by === 'logprob') return `rgba(220,40,40,${Math.min(1, -v / 5) * 0.75})`;
    const a = Math.min(1, Math.abs(v) / 1.5) * 0.7;
    return v >= 0 ? `rgba(30,160,60,${a})` : `rgba(220,40,40,${a})`;
  }
  function paint(root, by) {
    for (const el of root.querySelectorAll('.tok')) {
      el.style.background = colour(by, el);
      el.title = `id ${el.dataset.id} · logprob ${el.dataset.logprob || '–'} · advantage ${el.dataset.advantage} · ${el.dataset.trainable === '1' ? 'trained' : 'not trained'}`;
    }
    root.dataset.colour = by;
  }
  window.flowgrpoPaint = paint;
  window.flowgrpoColourings = COLOURINGS;
})();
