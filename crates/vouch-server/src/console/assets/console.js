// vouch console: the only script. Pages work without it; it adds live updates on a run page
// (the journal and the receipt arrive over SSE without reloading) and fills the sign-in
// form's time zone from the browser. Every value is set as text, never as HTML.
(function () {
  "use strict";
  var zone = document.querySelector("input[data-browser-zone]");
  if (zone && zone.value === "UTC") {
    try {
      var z = Intl.DateTimeFormat().resolvedOptions().timeZone;
      if (z) { zone.value = z; }
    } catch (e) { /* keep UTC */ }
  }
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  if (url.slice(-"/console/live".length) === "/console/live") {
    // The inbox: the page says which version of the inbox it was drawn from; a different one
    // means something changed — say so and update the badge, never reload by itself.
    var note = document.getElementById("inbox-changed");
    var drawn = note ? note.getAttribute("data-version") : null;
    var inbox = new EventSource(url);
    inbox.addEventListener("inbox", function (m) {
      var d = JSON.parse(m.data);
      if (d.version === drawn) { return; }
      if (note) { note.hidden = false; }
      var badge = document.getElementById("badge");
      if (badge) { badge.textContent = String(d.waiting); }
    });
    return;
  }
  var timeline = document.getElementById("timeline");
  var after = timeline ? timeline.getAttribute("data-after") || "0" : "0";
  var source = new EventSource(url + "?after=" + encodeURIComponent(after));
  function text(tag, cls, value) {
    var el = document.createElement(tag);
    if (cls) { el.className = cls; }
    el.textContent = value;
    return el;
  }
  source.addEventListener("journal", function (m) {
    var e = JSON.parse(m.data);
    if (!timeline) { return; }
    var li = document.createElement("li");
    li.className = "fresh";
    li.appendChild(text("span", "seq", "#" + e.seq));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(text("strong", "kind", e.kind));
    if (e.delivery) {
      li.appendChild(document.createTextNode(" "));
      li.appendChild(text("span", "muted", e.delivery));
    }
    li.appendChild(document.createTextNode(" "));
    li.appendChild(text("span", "muted", e.at));
    li.appendChild(document.createTextNode(" "));
    var h = text("code", "hash", String(e.hash).slice(0, 12));
    h.title = e.hash;
    li.appendChild(h);
    timeline.appendChild(li);
    timeline.setAttribute("data-after", String(e.seq));
  });
  source.addEventListener("receipt", function (m) {
    var r = JSON.parse(m.data);
    var pre = document.getElementById("receipt");
    var waiting = document.getElementById("receipt-waiting");
    if (pre) {
      pre.textContent = r.receipt;
      pre.hidden = false;
      pre.setAttribute("data-live", "arrived");
    }
    if (waiting) { waiting.textContent = "The run ended; here is its receipt."; }
    var outcome = document.getElementById("outcome");
    if (outcome && r.outcome) {
      outcome.textContent = r.outcome;
      outcome.className = r.outcome === "succeeded" ? "ok" : (r.outcome === "partial" ? "warn" : "bad");
    }
    // What the page showed as waiting is decided now: statuses, cards and the badge follow.
    (r.deliveries || []).forEach(function (d) {
      var rows = document.querySelectorAll("tr[data-delivery]");
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].getAttribute("data-delivery") === d.id) {
          var cell = rows[i].querySelector("td.status");
          if (cell) { cell.textContent = d.status; }
        }
      }
    });
    var open = document.getElementById("open-cards");
    if (open) { open.parentNode.removeChild(open); }
    var badge = document.getElementById("badge");
    if (badge) {
      if (r.waiting > 0) { badge.textContent = String(r.waiting); }
      else { badge.parentNode.removeChild(badge); }
    }
    source.close();
  });
  source.addEventListener("failed", function () { source.close(); });
})();
