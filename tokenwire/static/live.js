// The live page: create a stream, read it with the browser's own EventSource.
//
// How this works: POST /streams with this page's query string, then
// new EventSource(events_url).  Every "token" event is printed with its
// event id and the gap since the previous one.  When the server cuts the
// connection, EventSource reconnects by itself after the stream's `retry`
// and sends Last-Event-ID (the id of the last event it received); the
// server's next "open" frame says where it resumed, and the page marks both.
// On "done" the page closes the EventSource (otherwise it would reconnect)
// and writes its whole observation as JSON into #result and
// body[data-state], where a test (or a person) can read it.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const started = performance.now();
  const seen = {
    stream_id: null, ids: [], text: "", connections: [], gaps_ms: [], ttft_ms: null,
    reconnect_gap_ms: null, done: null, errors: [],
  };
  let lastArrival = null;
  let lastId = null;          // the id of the last event received: what the browser sends back
  let source = null;
  let resumedAt = null;       // first token index of a resumed connection, to mark it

  function setState(state) {
    document.body.dataset.state = state;
    $("state").textContent = state;
  }

  function ms(value) {
    return value === null ? "-" : value.toFixed(1) + " ms";
  }

  function median(values) {
    const sorted = values.slice().sort((a, b) => a - b);
    const mid = (sorted.length - 1) / 2;
    return (sorted[Math.floor(mid)] + sorted[Math.ceil(mid)]) / 2;
  }

  function publish() {
    $("result").textContent = JSON.stringify(seen);
  }

  function fail(message) {
    seen.errors.push(String(message));
    if (source !== null) {
      source.close();
    }
    setState("failed");
    publish();
  }

  function onOpenFrame(event) {
    // The server's own "open" event (a MessageEvent with JSON data); the
    // EventSource also fires a plain "open" Event when a connection opens.
    if (typeof event.data !== "string") {
      return;
    }
    const info = JSON.parse(event.data);
    const record = {
      resumed: info.resumed, start_index: info.start_index,
      last_event_id_sent: info.resumed ? lastId : null,
    };
    seen.connections.push(record);
    const item = document.createElement("li");
    item.textContent = info.resumed
      ? "reconnected: the browser sent Last-Event-ID: " + lastId + ", the server resumed at index " + info.start_index
      : "connected: stream " + info.stream_id + ", policy " + info.policy + ", buffer " + info.buffer;
    $("connections").appendChild(item);
    if (info.resumed) {
      resumedAt = info.start_index;
      const mark = document.createElement("span");
      mark.className = "cut";
      mark.textContent = "resumed after id " + lastId;
      $("answer").appendChild(mark);
    }
    setState("streaming");
  }

  function onToken(event) {
    const now = performance.now();
    const id = Number(event.lastEventId);
    if (seen.ttft_ms === null) {
      seen.ttft_ms = now - started;
      $("ttft").textContent = ms(seen.ttft_ms);
    }
    let gap = null;
    if (lastArrival !== null) {
      gap = now - lastArrival;
      if (id === resumedAt) {
        seen.reconnect_gap_ms = gap;      // includes the retry wait: kept out of the token gaps
      } else {
        seen.gaps_ms.push(gap);
      }
      $("gap").textContent = ms(gap);
      if (seen.gaps_ms.length > 0) {
        $("gaps").textContent = ms(median(seen.gaps_ms)) + " / " + ms(Math.max.apply(null, seen.gaps_ms));
      }
    }
    lastArrival = now;
    lastId = event.lastEventId;
    seen.ids.push(id);
    seen.text += event.data;
    const span = document.createElement("span");
    span.className = "tok";
    span.title = "id " + id;
    span.textContent = event.data;
    $("answer").appendChild(span);
    const row = document.createElement("tr");
    if (id === resumedAt) {
      row.className = "resumed";
    }
    for (const cell of [String(id), JSON.stringify(event.data), gap === null ? "-" : gap.toFixed(2)]) {
      const td = document.createElement("td");
      td.textContent = cell;
      row.appendChild(td);
    }
    $("frames").appendChild(row);
    $("count").textContent = String(seen.ids.length);
    $("last-id").textContent = lastId;
  }

  function onDone(event) {
    source.close();           // an EventSource left open would reconnect after the stream ends
    seen.done = JSON.parse(event.data);
    setState("done");
    publish();
  }

  function onError() {
    if (source.readyState === EventSource.CLOSED) {
      fail("the connection failed and the browser gave up");
      return;
    }
    const item = document.createElement("li");
    item.textContent = "connection lost after id " + lastId + "; the browser reconnects with Last-Event-ID: " + lastId;
    $("connections").appendChild(item);
    setState("reconnecting");
  }

  function open(info) {
    seen.stream_id = info.stream_id;
    $("stream-id").textContent = info.stream_id;
    source = new EventSource(info.events_url);
    source.addEventListener("open", onOpenFrame);
    source.addEventListener("token", onToken);
    source.addEventListener("done", onDone);
    source.addEventListener("error", onError);
  }

  function start() {
    fetch("/streams" + location.search, { method: "POST" })
      .then((response) => response.json().then((body) => {
        if (!response.ok) {
          throw new Error(response.status + ": " + body.error);
        }
        return body;
      }))
      .then(open)
      .catch(fail);
  }

  start();
})();
