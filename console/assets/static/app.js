// The console's only script: "pick every letter of this page". Nothing here
// reads record contents; they are rendered by the server, escaped.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var all = document.getElementById("all");
  if (!all) return;
  all.addEventListener("change", function () {
    document.querySelectorAll("input.pick").forEach(function (c) { c.checked = all.checked; });
  });
});
