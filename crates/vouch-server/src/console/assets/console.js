// vouch console: the only script. Pages work without it; it adds live updates on a run page
// (the journal and the receipt arrive over SSE without reloading), reads a chosen file into
// the start form's field, and fills the sign-in form's time zone from the browser. Values
// are set as text; markup comes only from the server's own templates, parsed into an inert
// document first.
(function () {
  "use strict";
  var zone = document.querySelector("input[data-browser-zone]");
  if (zone && zone.value === "UTC") {
    try {
      var z = Intl.DateTimeFormat().resolvedOptions().timeZone;
      if (z) { zone.value = z; }
    } catch (e) { /* keep UTC */ }
  }
  // Start a run: a chosen file is read here into the field, where the person sees it before
  // starting (the form sends the field, never the file).
  var upload = document.getElementById("start-upload");
  var file = document.getElementById("start-file");
  var field = document.getElementById("start-json");
  if (upload && file && field && window.FileReader) {
    upload.hidden = false;
    file.addEventListener("change", function () {
      var f = file.files && file.files[0];
      var note = document.getElementById("start-file-note");
      if (!f) { return; }
      if (f.size > 1048576) {
        if (note) { note.textContent = "That file is larger than 1 MiB; choose a smaller one."; }
        return;
      }
      var reader = new FileReader();
      reader.onload = function () {
        field.value = String(reader.result);
        if (note) { note.textContent = "Read " + f.name + " into the field above: check it, then start the run."; }
      };
      reader.readAsText(f);
    });
  }
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  if (url.slice(-"/console/live".length) === "/console/live") {
    // The inbox: the page says which version of the inbox it was drawn from; a different one
    // means something changed — say so and update the badge, never reload by itself.
    var note = document.getElementById("inbox-changed");
    var drawn = note ? note.getAttribute("data-version") : null;
    var inbox = new EventSource(url);
    var main = document.getElementById("main");
    // The page redraws its own content in place: the server renders the inbox again (escaped
    // as every page is) and the new content replaces the old. Never a reload; if fetching
    // fails, the page says that something new arrived, with a link.
    function redraw(d) {
      fetch(window.location.pathname, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById("main");
          if (!fresh || !main) { throw new Error("no content"); }
          main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes).map(function (n) {
            return document.importNode(n, true);
          }));
          main.setAttribute("data-redrawn", d.version);
          var n = document.getElementById("inbox-changed");
          drawn = n ? n.getAttribute("data-version") : d.version;
          // The header's badge follows (it may appear or go).
          var header = document.querySelector("header");
          var freshHeader = doc.querySelector("header");
          if (header && freshHeader) { header.replaceWith(document.importNode(freshHeader, true)); }
        })
        .catch(function () {
          var n = document.getElementById("inbox-changed");
          if (n) { n.hidden = false; }
        });
    }
    inbox.addEventListener("inbox", function (m) {
      var d = JSON.parse(m.data);
      if (d.version === drawn) { return; }
      redraw(d);
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
    // The step in full, as a reload draws it: the server's markup (escaped there), parsed
    // into an inert document (nothing in it runs) and moved into the page.
    if (e.html) {
      var doc = new DOMParser().parseFromString("<ol>" + e.html + "</ol>", "text/html");
      var drawn = doc.querySelector("ol > li");
      if (drawn) {
        timeline.appendChild(document.importNode(drawn, true));
        timeline.setAttribute("data-after", String(e.seq));
        return;
      }
    }
    var li = document.createElement("li");
    li.className = "fresh";
    li.appendChild(text("span", "seq", "#" + e.seq));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(text("strong", "kind", e.kind));
    if (e.delivery) {
      li.appendChild(document.createTextNode(" "));
      li.appendChild(text("span", "muted", e.delivery));
    }
    if (e.what) {
      li.appendChild(document.createTextNode(" "));
      li.appendChild(text("span", "what", e.what));
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
    var ended = document.getElementById("ended");
    if (ended && r.ended_at) { ended.textContent = r.ended_at; }
    var chain = document.getElementById("chain");
    if (chain && r.chain) { chain.textContent = r.chain; }
    // What the page showed as waiting is decided now: statuses, evidence, cards and the badge
    // follow, in the same plain words (the contract's term beside them) the page was drawn in.
    (r.deliveries || []).forEach(function (d) {
      var rows = document.querySelectorAll("tr[data-delivery]");
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].getAttribute("data-delivery") !== d.id) { continue; }
        var cell = rows[i].querySelector("td.status");
        if (cell) {
          cell.textContent = "";
          cell.appendChild(text("span", "plain", d.words));
          if (d.words !== d.status) {
            cell.appendChild(document.createTextNode(" "));
            cell.appendChild(text("code", "term", d.status));
          }
        }
        var ev = rows[i].querySelector("td.evidence");
        if (ev) {
          ev.textContent = "";
          if (d.evidence) { ev.appendChild(text("code", "", d.evidence)); }
          if (d.reason) {
            ev.appendChild(document.createTextNode(" "));
            ev.appendChild(text("span", "muted", d.reason));
          }
        }
      }
    });
    // An ended run can no longer be cancelled: its actions go (a reload offers resume).
    var actions = document.querySelector(".actions");
    if (actions) { actions.parentNode.removeChild(actions); }
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
