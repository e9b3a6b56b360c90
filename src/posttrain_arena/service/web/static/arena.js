// PostTrain Arena: live run state. Polls the JSON API for runs that are queued or running
// and updates their state and stage in place; a run page reloads once its run has ended.
(function () {
  "use strict";
  var ACTIVE = { queued: true, running: true };
  var PERIOD_MS = 1500;

  function setField(el, name, value) {
    var nodes = el.querySelectorAll('[data-field="' + name + '"]');
    for (var i = 0; i < nodes.length; i++) { nodes[i].textContent = value; }
  }

  function update(el, run) {
    setField(el, "state", run.state);
    setField(el, "stage", run.stage || "\u2014");
    setField(el, "stages_done", (run.stages_done || []).join(", ") || "\u2014");
    setField(el, "reason", run.reason || "");
    var states = el.querySelectorAll('[data-field="state"]');
    for (var i = 0; i < states.length; i++) { states[i].className = "state state-" + run.state; }
    var was = el.getAttribute("data-state");
    el.setAttribute("data-state", run.state);
    if (ACTIVE[was] && !ACTIVE[run.state] && el.hasAttribute("data-reload-on-end")) {
      window.location.reload();
    }
  }

  function poll() {
    var els = document.querySelectorAll("[data-run-id]");
    var pending = 0;
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      if (!ACTIVE[el.getAttribute("data-state")]) { continue; }
      pending++;
      (function (el) {
        fetch("/api/runs/" + el.getAttribute("data-run-id"), {
          headers: { Accept: "application/json" }, credentials: "same-origin"
        }).then(function (resp) {
          return resp.ok ? resp.json() : null;
        }).then(function (run) {
          if (run) { update(el, run); }
        }).catch(function () { /* offline for a moment: try again next period */ });
      })(el);
    }
    if (pending) { window.setTimeout(poll, PERIOD_MS); }
  }

  document.addEventListener("DOMContentLoaded", function () {
    window.setTimeout(poll, PERIOD_MS);
  });
})();
