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
//
// A refused request is tried again by the page itself: a 503 on POST
// /streams (the token log is down) after its Retry-After seconds; a
// connection the EventSource gives up on (any answer but 200, such as the
// 503 of a server at --max-live, which an EventSource never retries) after
// the server's Retry-After (body[data-retry-after-s]: an EventSource does
// not show the status or headers of what it refused), with a new
// EventSource on events_url?last_event_id=<the last id received>, so the
// stream resumes after it and nothing repeats.  At most MAX_TRIES in a row;
// each try is listed under Connections and in the result's "retries".
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const MAX_TRIES = 5;        // refused requests in a row before the page gives up
  const MAX_WAIT_S = 60;      // a longer (or unreadable) Retry-After waits the server's own figure
  const started = performance.now();
  const seen = {
    stream_id: null, ids: [], text: "", connections: [], gaps_ms: [], ttft_ms: null,
    reconnect_gap_ms: null, done: null, errors: [], retries: [],
  };
  let lastArrival = null;
  let lastId = null;          // the id of the last event received: what the browser sends back
  let source = null;
  let eventsUrl = null;
  let resumedAt = null;       // first token index of a resumed connection, to mark it
  let tries = 0;              // refused requests since the last one that was answered
  let pageResumed = false;    // the next open frame answers the page's own ?last_event_id=, not the browser's

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

  function note(text) {
    const item = document.createElement("li");
    item.textContent = text;
    $("connections").appendChild(item);
  }

  // The server's Retry-After, in whole seconds: the header when the answer can be read, else the page's.
  function retryAfter(response) {
    const header = response === null ? null : response.headers.get("Retry-After");
    const value = header === null ? NaN : Number(header);
    const fallback = Number(document.body.dataset.retryAfterS);
    if (Number.isInteger(value) && value >= 0 && value <= MAX_WAIT_S) {
      return value;
    }
    return Number.isInteger(fallback) && fallback >= 0 ? Math.min(fallback, MAX_WAIT_S) : 1;
  }

  // Try `again` after `waitS` seconds, unless MAX_TRIES refusals in a row have been tried already.
  function retry(what, status, waitS, again) {
    if (tries >= MAX_TRIES) {
      fail(what + " was refused " + (tries + 1) + " times in a row; the page gave up");
      return;
    }
    tries += 1;
    seen.retries.push({ what: what, status: status, wait_s: waitS, try: tries, last_event_id: lastId });
    note(what + " refused" + (status === null ? "" : " (" + status + ")") + "; trying again in " + waitS
      + " s" + (lastId === null ? "" : " after id " + lastId) + " (try " + tries + " of " + MAX_TRIES + ")");
    $("retries").textContent = String(seen.retries.length);
    setState("waiting");
    publish();
    setTimeout(again, waitS * 1000);
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
    tries = 0;
    const sent = pageResumed ? "the page asked for ?last_event_id=" : "the browser sent Last-Event-ID: ";
    pageResumed = false;
    note(info.resumed
      ? "reconnected: " + sent + lastId + ", the server resumed at index " + info.start_index
      : "connected: stream " + info.stream_id + ", policy " + info.policy + ", buffer " + info.buffer);
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
      // The browser gave up on this connection (it was answered, but not with 200) and will not retry.
      retry("the events connection", null, retryAfter(null), connect);
      return;
    }
    note("connection lost after id " + lastId + "; the browser reconnects with Last-Event-ID: " + lastId);
    setState("reconnecting");
  }

  function connect() {
    const url = lastId === null ? eventsUrl : eventsUrl + "?last_event_id=" + encodeURIComponent(lastId);
    pageResumed = lastId !== null;
    source = new EventSource(url);
    source.addEventListener("open", onOpenFrame);
    source.addEventListener("token", onToken);
    source.addEventListener("done", onDone);
    source.addEventListener("error", onError);
  }

  function open(info) {
    seen.stream_id = info.stream_id;
    $("stream-id").textContent = info.stream_id;
    eventsUrl = info.events_url;
    connect();
  }

  function start() {
    fetch("/streams" + location.search, { method: "POST" })
      .then((response) => {
        if (response.status === 503) {
          retry("POST /streams", 503, retryAfter(response), start);
          return null;
        }
        return response.json().then((body) => {
          if (!response.ok) {
            throw new Error(response.status + ": " + body.error);
          }
          tries = 0;
          return body;
        });
      })
      .then((info) => {
        if (info !== null) {
          open(info);
        }
      })
      .catch(fail);
  }

  start();
})();
