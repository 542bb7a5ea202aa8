"""The report page's one stylesheet (report/html_page.py inlines it): screen from a laptop's
1280 px down to 800 px, and print. Colours name what they show, the same in every drawing."""

CSS = """
:root {
  --ink: #1d232b; --muted: #5b6470; --rule: #d5dae0; --paper: #ffffff; --band: #f4f6f8;
  --file: #e6e9ed; --written: #3d7cc9; --unflushed: #f0a030; --damaged: #d0312d; --dropped: #f3c4c2;
  --cut: #8b0000; --start: #1b7f3b; --consumed: #1b7f3b; --lag: #f0a030; --gone: #c9ced4;
  --error: #d0312d; --warning: #b86e00; --info: #5b6470;
}
* { box-sizing: border-box; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body { margin: 0; background: var(--paper); color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--rule); }
h3 { font-size: 15px; margin: 18px 0 6px; }
code, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.path { overflow-wrap: anywhere; word-break: break-word; }
.muted { color: var(--muted); }
.summary { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 6px 18px;
  margin: 12px 0 0; padding: 10px 12px; background: var(--band); border-radius: 6px; }
.summary div { display: flex; gap: 8px; justify-content: space-between; border-bottom: 1px dotted var(--rule); }
.summary dt { color: var(--muted); }
.summary dd { margin: 0; text-align: right; font-weight: 600; }
.nowrap { white-space: nowrap; }
.reasons { margin: 8px 0 0; padding-left: 18px; color: var(--muted); }
.verdict { margin: 10px 0 0; padding: 8px 12px; border-left: 5px solid var(--start); background: var(--band); }
.verdict.bad { border-left-color: var(--error); }
.verdict.warn { border-left-color: var(--warning); }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 6px 0 10px; color: var(--muted); font-size: 13px; }
.legend span { display: inline-flex; align-items: center; gap: 5px; }
.swatch { display: inline-block; width: 14px; height: 10px; border: 1px solid rgba(0,0,0,.25); }
.sw-file { background: var(--file); } .sw-written { background: var(--written); }
.sw-unflushed { background: var(--unflushed); } .sw-damaged { background: var(--damaged); }
.sw-dropped { background: var(--dropped); } .sw-missing { background: #fff; border: 1px dashed var(--damaged); } .sw-cut { background: var(--cut); width: 3px; }
.sw-start { background: var(--start); width: 3px; } .sw-consumed { background: var(--consumed); width: 3px; }
.sw-lag { background: var(--lag); } .sw-gone { background: var(--gone); }
.segment { display: grid; grid-template-columns: 270px 1fr; gap: 2px 12px; align-items: center;
  padding: 3px 0; break-inside: avoid; }
.seg-label { font-size: 12.5px; line-height: 1.25; }
.seg-label .flags { display: block; color: var(--muted); font-size: 11.5px; }
.flag-start { color: var(--start); font-weight: 600; }
.flag-cut, .flag-damaged { color: var(--error); font-weight: 600; }
.strip { width: 100%; height: 22px; display: block; }
.strip-wrap { position: relative; }
.zoom-note { display: block; margin: 3px 0 1px; color: var(--muted); font-size: 11.5px; }
.strip.zoom { height: 16px; }
.file { fill: var(--file); } .written { fill: var(--written); } .unflushed { fill: var(--unflushed); }
.damaged { fill: var(--damaged); } .dropped { fill: var(--dropped); }
.missing { fill: #fff; stroke: var(--damaged); stroke-width: 2; stroke-dasharray: 6 4; }
.cut { stroke: var(--cut); stroke-width: 3; } .start { stroke: var(--start); stroke-width: 4; }
.gone { fill: var(--gone); } .present { fill: var(--written); } .lag { fill: var(--lag); }
.consumed { stroke: var(--consumed); stroke-width: 3; }
.cover { fill: var(--written); } .cover-empty { fill: var(--gone); }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--rule); vertical-align: top; }
th { background: var(--band); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.bar { width: 38%; min-width: 160px; }
td.bar svg { width: 100%; height: 14px; display: block; }
.table-wrap { overflow-x: auto; }
.consequence { margin: 14px 0 0; border: 1px solid var(--rule); border-radius: 6px; break-inside: auto; }
.consequence > h3 { margin: 0; padding: 6px 12px; background: var(--band); border-bottom: 1px solid var(--rule); }
.consequence > h3 .meaning { font-weight: 400; color: var(--muted); }
.finding { padding: 8px 12px; border-bottom: 1px solid var(--rule); break-inside: avoid; }
.finding:last-child { border-bottom: 0; }
.finding .head { display: flex; flex-wrap: wrap; gap: 4px 10px; align-items: baseline; }
.sev { display: inline-block; min-width: 58px; padding: 0 6px; border-radius: 3px; color: #fff;
  font-size: 12px; font-weight: 600; text-align: center; }
.sev-error { background: var(--error); } .sev-warning { background: var(--warning); } .sev-info { background: var(--info); }
.finding .id { font-weight: 600; }
.finding .where { color: var(--muted); font-size: 12.5px; }
.finding .message { margin: 3px 0 0; overflow-wrap: anywhere; }
.finding .todo { margin: 3px 0 0; }
.finding .todo b { color: var(--start); }
td.time { font-size: 12px; font-variant-numeric: tabular-nums; white-space: nowrap; }
footer { margin-top: 28px; color: var(--muted); font-size: 12px; }
@media (max-width: 960px) {
  main { padding: 12px; }
  .segment { grid-template-columns: 170px 1fr; }
  td.bar { width: 30%; }
  .summary { grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); }
}
@media print {
  @page { size: A4 landscape; margin: 12mm; }
  main { max-width: none; padding: 0; }
  h2 { break-after: avoid; }
  .consequence, .table-wrap { overflow: visible; }
  tr, .segment, .finding { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""
