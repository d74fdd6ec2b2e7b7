// forms.js: the line and trainer pickers, and the dataset form's live check. On each edit the form is posted
// (with its CSRF token) to its data-check address, which runs the
// application's dataset.check (dataset.build's own validation) and answers
// {ok, message, problems}; the answer is shown under the form (a live
// region, so screen readers hear it). Nothing is built or stored.
(function () {
  "use strict";
  // Choosing another line or trainer reloads its form (the button stays
  // for a browser without scripts).
  [["ds-line-pick", "line-pick"], ["trainer-select", "trainer-pick"]].forEach(function (p) {
    const sel = document.getElementById(p[0]), f = document.getElementById(p[1]);
    if (sel && f) sel.addEventListener("change", function () { f.submit(); });
  });
  const form = document.getElementById("dataset-form");
  if (!form || !form.dataset.check) return;
  const out = document.getElementById("spec-check");
  const list = document.getElementById("spec-problems");
  let seq = 0, timer = null;
  function check() {
    const mine = ++seq;
    const body = new URLSearchParams(new FormData(form));
    fetch(form.dataset.check, { method: "POST", body: body, credentials: "same-origin",
      headers: { "Content-Type": "application/x-www-form-urlencoded" } })
      .then(function (r) { return r.json(); })
      .then(function (res) {
        if (mine !== seq) return; // a newer check is on its way
        out.textContent = res.message;
        out.className = res.ok ? "ok" : "bad";
        out.dataset.ok = String(res.ok);
        list.replaceChildren();
        (res.problems || []).forEach(function (p) {
          const li = document.createElement("li");
          li.textContent = (p.field ? p.field + ": " : "") + p.message;
          list.appendChild(li);
        });
      })
      .catch(function (e) { if (mine === seq) { out.textContent = "Could not check the spec: " + e; out.className = "bad"; } });
  }
  function soon() { clearTimeout(timer); timer = setTimeout(check, 250); }
  form.addEventListener("input", soon);
  form.addEventListener("change", soon);
  check();
})();
