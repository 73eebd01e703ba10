// The console's only script: "pick every letter of this page", and going on
// from the page a login at the identity provider ends on. Nothing here reads
// record contents; they are rendered by the server, escaped.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var go = document.getElementById("continue");
  if (go) {
    window.location.replace(go.getAttribute("href"));
    return;
  }
  var all = document.getElementById("all");
  if (!all) return;
  all.addEventListener("change", function () {
    document.querySelectorAll("input.pick").forEach(function (c) { c.checked = all.checked; });
  });
});
