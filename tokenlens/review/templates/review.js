// Keyboard shortcuts for the review page; the page works without them.
(function () {
  "use strict";
  function el(id) { return document.getElementById(id); }
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA")) {
      if (event.key === "Escape") { target.blur(); }
      return;
    }
    var link;
    switch (event.key) {
      case "a": el("grade-a").focus(); break;
      case "b": el("grade-b").focus(); break;
      case "x": el("cant-tell-a").click(); break;
      case "y": el("cant-tell-b").click(); break;
      case "n": link = el("next"); if (link) { window.location = link.href; } break;
      case "p": link = el("prev"); if (link) { window.location = link.href; } break;
      default: return;
    }
    event.preventDefault();
  });
}());
