// The chat page's script: sends the form with fetch and shows the answer as its
// server-sent events arrive (ReadableStream). Without this file the form posts and the
// page comes back with the whole answer.
"use strict";
(function () {
  var form = document.getElementById("chat-form");
  if (!form || !window.fetch || !window.TextDecoder) { return; }
  var answer = document.getElementById("chat-answer");
  var error = document.getElementById("chat-error");
  var usage = document.getElementById("chat-usage");
  var button = form.querySelector("button[type=submit]");

  function handle(line) {
    if (line.indexOf("data:") !== 0) { return; }
    var data = line.slice(5).trim();
    if (data === "" || data === "[DONE]") { return; }
    var event = JSON.parse(data);
    if (event.error) { error.textContent = event.error.message || "error"; return; }
    (event.choices || []).forEach(function (choice) {
      var delta = choice.delta || {};
      if (delta.content) { answer.textContent += delta.content; }
    });
    if (event.usage) {
      usage.textContent = usage.getAttribute("data-label") + ": " + event.usage.prompt_tokens + " + " +
        event.usage.completion_tokens + " = " + event.usage.total_tokens + " " + usage.getAttribute("data-tokens");
    }
  }

  form.addEventListener("submit", function (submitted) {
    submitted.preventDefault();
    answer.textContent = "";
    error.textContent = "";
    usage.textContent = "";
    button.disabled = true;
    var body = new URLSearchParams(new FormData(form));
    fetch(form.action, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "accept": "text/event-stream" }
    }).then(function (response) {
      var type = response.headers.get("content-type") || "";
      if (type.indexOf("text/event-stream") < 0) {
        return response.json().then(function (refused) {
          error.textContent = (refused.error && refused.error.message) || ("HTTP " + response.status);
        });
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var held = "";
      function pump() {
        return reader.read().then(function (step) {
          if (step.done) { if (held) { handle(held); } return; }
          held += decoder.decode(step.value, { stream: true });
          var lines = held.split("\n");
          held = lines.pop();
          lines.forEach(handle);
          return pump();
        });
      }
      return pump();
    }).catch(function (failed) {
      error.textContent = String(failed);
    }).then(function () {
      button.disabled = false;
    });
  });
})();
