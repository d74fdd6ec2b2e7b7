// Sortable tables: a table.sortable whose header cells hold
// button.sort sorts its body by that column on click (or Enter/Space:
// they are buttons); again reverses. A cell's data-v is its sort key when
// present (numbers with data-type="num"; an empty key sorts last). No
// framework, no external code.
(function () {
  "use strict";
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    heads.forEach(function (th, col) {
      var b = th.querySelector("button.sort");
      if (!b) { return; }
      b.addEventListener("click", function () {
        var num = b.getAttribute("data-type") === "num";
        var asc = th.getAttribute("aria-sort") !== "ascending";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows).filter(function (r) { return r.cells.length === heads.length; });
        function key(r) {
          var c = r.cells[col];
          var v = c.hasAttribute("data-v") ? c.getAttribute("data-v") : c.textContent.trim();
          if (!num) { return v.toLowerCase(); }
          return v === "" || isNaN(+v) ? null : +v;
        }
        rows.sort(function (x, y) {
          var a = key(x), c = key(y);
          if (a === null || c === null) { return a === c ? 0 : a === null ? 1 : -1; }
          var d = a < c ? -1 : a > c ? 1 : 0;
          return asc ? d : -d;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
