// Progressive enhancement only: every page reads the same without this file.
// Adds a copy button to each code snippet marked data-copy.
"use strict";
document.querySelectorAll("pre[data-copy]").forEach(function (pre) {
  var button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  var label = pre.getAttribute("data-copy-label") || "Copy";
  var done = pre.getAttribute("data-copied-label") || "Copied";
  button.textContent = label;
  button.setAttribute("aria-label", label + ": " + (pre.getAttribute("aria-label") || ""));
  button.addEventListener("click", function () {
    var text = pre.querySelector("code").textContent;
    navigator.clipboard.writeText(text).then(function () {
      button.textContent = done;
      setTimeout(function () { button.textContent = label; }, 1500);
    });
  });
  pre.parentNode.insertBefore(button, pre);
});
