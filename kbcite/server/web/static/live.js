// The event log's live view: new events from the page's server-sent stream, appended at the
// top. Only this page loads it; without it the page is reloaded for new events.
(function () {
  "use strict";
  var list = document.getElementById("events");
  var status = document.getElementById("live-status");
  if (!list || !window.EventSource) { return; }
  var source = new EventSource(list.getAttribute("data-stream"));
  var base = list.getAttribute("data-kb");
  function text(tag, value, cls) {
    var node = document.createElement(tag);
    node.textContent = value;
    if (cls) { node.className = cls; }
    return node;
  }
  source.addEventListener("open", function () {
    status.textContent = "Live: new events appear at the top as they happen.";
  });
  source.addEventListener("error", function () {
    status.textContent = "Reconnecting to the live log…";
  });
  source.addEventListener("kb", function (message) {
    var event = JSON.parse(message.data);
    var item = document.createElement("li");
    item.className = "new";
    item.appendChild(text("span", "#" + event.sequence, "seq"));
    item.appendChild(document.createTextNode(" "));
    item.appendChild(text("code", event.type));
    item.appendChild(document.createTextNode(" "));
    var link = text("a", event.article_id);
    link.href = base + "/articles/" + encodeURIComponent(event.article_id) + "@" +
      encodeURIComponent(event.updated_at);
    item.appendChild(link);
    item.appendChild(document.createTextNode(" "));
    var time = text("time", event.updated_at);
    time.setAttribute("datetime", event.updated_at);
    item.appendChild(time);
    if (event.actor) { item.appendChild(document.createTextNode(" by " + event.actor)); }
    list.insertBefore(item, list.firstChild);
  });
}());
