// Progressive enhancement for the console. Every page works without it; with it: copy
// buttons, a drop zone on file inputs, confirmation before destructive forms, and a message
// when an htmx request fails. Loaded from a file (the CSP forbids inline script).
"use strict";

(function () {
  function announce(text, isError) {
    var area = document.getElementById("flash");
    if (!area) return;
    var p = document.createElement("p");
    p.className = isError ? "flash flash-error" : "flash";
    p.setAttribute("role", isError ? "alert" : "status");
    p.textContent = text;
    area.replaceChildren(p);
  }

  // <button data-copy="element-id" hidden>: shown, and copies that element's text.
  function setUpCopyButtons(root) {
    root.querySelectorAll("button[data-copy]").forEach(function (button) {
      if (!navigator.clipboard) return;
      button.hidden = false;
      if (button.dataset.ready) return;
      button.dataset.ready = "1";
      button.addEventListener("click", function () {
        var source = document.getElementById(button.dataset.copy);
        if (!source) return;
        var text = "value" in source ? source.value : source.textContent;
        navigator.clipboard.writeText(text).then(function () {
          button.textContent = "Copied";
          setTimeout(function () { button.textContent = "Copy"; }, 2000);
        }, function () { announce("Copying failed: select the text and copy it by hand.", true); });
      });
    });
  }

  // <form data-confirm="Question?">: asks before sending (the pages also have a
  // confirmation step of their own where it matters).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  }, true);

  // <div class="dropzone"> around an <input type="file" multiple>: files dropped on the zone
  // go into the input, as if chosen; the chosen names are listed.
  function setUpDropZones(root) {
    root.querySelectorAll(".dropzone").forEach(function (zone) {
      var input = zone.querySelector("input[type=file]");
      var list = zone.querySelector(".file-list");
      if (!input || zone.dataset.ready) return;
      zone.dataset.ready = "1";
      function showNames() {
        if (!list) return;
        list.replaceChildren();
        Array.prototype.forEach.call(input.files, function (file) {
          var li = document.createElement("li");
          li.textContent = file.name + " (" + Math.max(1, Math.round(file.size / 1024)) + " KB)";
          list.appendChild(li);
        });
      }
      input.addEventListener("change", showNames);
      ["dragenter", "dragover"].forEach(function (name) {
        zone.addEventListener(name, function (event) {
          event.preventDefault();
          zone.classList.add("dragging");
        });
      });
      ["dragleave", "drop"].forEach(function (name) {
        zone.addEventListener(name, function () { zone.classList.remove("dragging"); });
      });
      zone.addEventListener("drop", function (event) {
        event.preventDefault();
        if (!event.dataTransfer || !event.dataTransfer.files.length) return;
        input.files = event.dataTransfer.files;
        showNames();
      });
      var hint = zone.querySelector(".drop-hint");
      if (hint) hint.hidden = false;
    });
  }

  function setUp(root) {
    setUpCopyButtons(root);
    setUpDropZones(root);
  }

  document.addEventListener("DOMContentLoaded", function () { setUp(document); });
  // Fragments htmx swaps in get the same behaviour.
  document.addEventListener("htmx:load", function (event) { setUp(event.target); });
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    announce("The request failed (" + status + "). Reload the page and try again.", true);
  });
  document.addEventListener("htmx:sendError", function () {
    announce("The server could not be reached. Check the connection and try again.", true);
  });
})();
