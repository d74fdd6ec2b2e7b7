// twin.js: the scene editor's live check and the trial forms' sliders.
// The scene file is posted (with the form's CSRF token) to the form's
// data-check address on each edit, which runs scene.check and answers
// {ok, message, problems}: every finding is listed with its path in the
// file. Each move's slider and number field are kept equal. Nothing is
// stored by either.
(function () {
  "use strict";
  document.querySelectorAll("input.move-slider").forEach(function (s) {
    const n = document.getElementById(s.dataset.for);
    if (!n) return;
    s.addEventListener("input", function () { n.value = s.value; });
    n.addEventListener("input", function () { s.value = n.value; });
  });
  const form = document.getElementById("scene-form");
  if (!form || !form.dataset.check) return;
  const doc = document.getElementById("scene-doc");
  const out = document.getElementById("scene-check");
  const list = document.getElementById("scene-problems");
  let seq = 0, timer = null;
  function check() {
    if (!doc.value.trim()) return;
    const mine = ++seq;
    const body = new URLSearchParams(new FormData(form));
    body.set("live", "1");
    fetch(form.dataset.check, { method: "POST", body: body, credentials: "same-origin",
      headers: { "Content-Type": "application/x-www-form-urlencoded" } })
      .then(function (r) { return r.json(); })
      .then(function (res) {
        if (mine !== seq) return;
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
      .catch(function (e) { if (mine === seq) { out.textContent = "Could not check the scene: " + e; out.className = "bad"; } });
  }
  doc.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(check, 400); });
  check();
})();
