// The static files of the operators' web inbox (cli/inbox_http.cpp): its one script and its one
// stylesheet, served from /static/ — the Content-Security-Policy allows no other script or style,
// inline or elsewhere. Kept here, in the binary, so `remitvm inbox` works from any directory.
#pragma once

namespace remit::cli::inbox {

// Asks before a decision is sent (the request is named in the form's data-confirm), and lets a
// whole row of the list open its request. Nothing else: the pages work without it.
inline constexpr const char* kScript = R"js("use strict";
// Remit inbox: the only script the pages load (docs/operators.md, "The web inbox").
document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  for (const row of document.querySelectorAll("tr[data-href]")) {
    row.addEventListener("click", (event) => {
      if (event.target.closest("a, button, form, input, textarea")) return;
      window.location.assign(row.dataset.href);
    });
  }
});
)js";

inline constexpr const char* kStyle = R"css(/* Remit inbox (docs/operators.md, "The web inbox") */
:root { --ink: #1d232b; --muted: #5b6573; --line: #d8dde4; --bg: #f6f7f9; --ok: #1f7a3a; --no: #a3262b; --warn: #8a5a00; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: var(--bg); }
header { display: flex; align-items: center; gap: 1rem; padding: .6rem 1.5rem; background: #fff; border-bottom: 1px solid var(--line); }
header .brand { font-weight: 700; color: var(--ink); text-decoration: none; }
header .who { margin-left: auto; color: var(--muted); }
header form { margin: 0; }
main { max-width: 72rem; margin: 0 auto; padding: 1.2rem 1.5rem 3rem; }
h1 { font-size: 1.45rem; margin: .2rem 0 .8rem; }
h1 code { font-size: inherit; }
h2 { font-size: 1.1rem; margin: 1.6rem 0 .5rem; border-bottom: 1px solid var(--line); padding-bottom: .2rem; }
h3 { font-size: 1rem; margin: 1rem 0 .3rem; font-family: ui-monospace, monospace; }
a { color: #1a56a8; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .88rem; }
pre { background: #fff; border: 1px solid var(--line); border-radius: 4px; padding: .6rem .8rem; white-space: pre-wrap; overflow-wrap: anywhere; margin: .3rem 0; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; vertical-align: top; padding: .5rem .7rem; border-bottom: 1px solid var(--line); }
th { background: #eef1f5; font-weight: 600; }
tr[data-href] { cursor: pointer; }
tr[data-href]:hover td { background: #f3f7fd; }
td.args code { overflow-wrap: anywhere; }
ul.reasons { margin: 0; padding-left: 1.1rem; }
.muted, .store { color: var(--muted); }
.status-pending { color: var(--warn); font-weight: 600; }
.status-approved { color: var(--ok); font-weight: 600; }
.notice { background: #e9f5ec; border: 1px solid #b9dcc3; padding: .6rem .9rem; border-radius: 4px; }
.notice.denied { background: #fbecec; border-color: #e5bcbd; }
.error { background: #fbecec; border: 1px solid #e5bcbd; padding: .6rem .9rem; border-radius: 4px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1.2rem; background: #fff; border: 1px solid var(--line); padding: .8rem 1rem; border-radius: 4px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.tags { color: var(--no); }
ol.provenance > li { margin-bottom: .8rem; }
.decide { display: flex; gap: 2rem; flex-wrap: wrap; align-items: flex-end; background: #fff; border: 1px solid var(--line); padding: 1rem; border-radius: 4px; }
.decide form { margin: 0; display: flex; gap: .6rem; align-items: flex-end; }
.decide label { display: flex; flex-direction: column; font-size: .9rem; color: var(--muted); }
.decide input[type=text] { width: 22rem; padding: .4rem; font: inherit; }
button { font: inherit; padding: .4rem 1rem; border-radius: 4px; border: 1px solid var(--line); background: #fff; cursor: pointer; }
button.approve { background: var(--ok); border-color: var(--ok); color: #fff; }
button.deny { background: var(--no); border-color: var(--no); color: #fff; }
form.continue { margin: .8rem 0; }
button.continue { background: #1a56a8; border-color: #1a56a8; color: #fff; }
form.login { display: flex; flex-direction: column; gap: .8rem; max-width: 24rem; background: #fff; border: 1px solid var(--line); padding: 1.2rem; border-radius: 4px; }
form.login input { padding: .45rem; font: inherit; }
)css";

}  // namespace remit::cli::inbox
