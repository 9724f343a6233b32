// The live page: create a stream, read it with the browser's own EventSource.
//
// How this works: POST /streams with this page's query string (plus the
// page's watchable pace, body[data-pace-ms], when the address names no
// producer_ms), then new EventSource(events_url).  Every "token" event is
// shown with its event id and the gap since the previous one, and drawn on
// the arrivals chart.  When the server cuts the connection, EventSource
// reconnects by itself after the stream's `retry` (body[data-retry-ms]) and
// sends Last-Event-ID; the page counts that wait down, shades it on the
// chart, and marks where the server's next "open" frame resumed.  On "done"
// the page closes the EventSource (otherwise it would reconnect), writes a
// summary and its whole observation as JSON into #result and
// body[data-state], where a test (or a person) can read it; on "failed" (the
// model failed: the server never names an event "error", which is the
// EventSource's own, fired on every dropped connection) it closes it and says
// why.  State changes are said in #status (an aria-live region); a failure
// is said once, in #error, with its reason (the status box is then hidden).
// #shown says how much of the answer the stream carries (the first `tokens`
// of the canned answer's body[data-answer-tokens]).
//
// A refused request is tried again by the page itself: a 503 on POST
// /streams (the token log is down) after its Retry-After seconds; a
// connection the EventSource gives up on (any answer but 200, such as the
// 503 of a server at --max-live, which an EventSource never retries) after
// the server's Retry-After (body[data-retry-after-s]: an EventSource does
// not show the status or headers of what it refused), with a new
// EventSource on events_url?last_event_id=<the last id received>, so the
// stream resumes after it and nothing repeats.  At most MAX_TRIES in a row;
// each try is listed under Connections and in the result's "retries", with
// the server's reason when the answer can be read (a 503's JSON "error"),
// and the failure after the last one names it.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  const MAX_TRIES = 5;        // refused requests in a row before the page gives up
  const MAX_WAIT_S = 60;      // a longer (or unreadable) Retry-After waits the server's own figure
  const TICK_MS = 100;        // how often the outage countdown is redrawn
  // The events of the parts that are not text (tokenwire.core.parts: each is named after its kind).
  const PART_KINDS = ["reasoning", "refusal", "tool-call-start", "tool-call-delta", "tool-call-end", "tool-result",
    "source", "file", "data", "step", "usage", "finish"];
  const body = document.body.dataset;
  const started = performance.now();
  const seen = {
    stream_id: null, ids: [], text: "", parts: {}, usage: null, finish: null, connections: [], gaps_ms: [],
    ttft_ms: null,
    reconnect_gap_ms: null, done: null, errors: [], retries: [], outages_ms: [],
  };
  const points = [];          // [ms since start, tokens received], for the chart
  let lastArrival = null;
  let lastId = null;          // the id of the last event received: what the browser sends back
  let source = null;
  let eventsUrl = null;
  let resumedAt = null;       // first token index of a resumed connection, to mark it
  let tries = 0;              // refused requests since the last one that was answered
  let pageResumed = false;    // the next open frame answers the page's own ?last_event_id=, not the browser's
  let outage = null;          // {from: ms, timer} while the connection is down
  let refusal = null;         // the last refusal's status and reason, as words: "503: the token log is unavailable"

  const round = (value) => Math.round(value * 100) / 100;
  const now = () => performance.now() - started;

  function say(text) {
    $("status").textContent = text;
  }

  function setState(state, words) {
    document.body.dataset.state = state;
    $("state").textContent = state;
    if (words) {
      say(words);
    }
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
    $("result").textContent = JSON.stringify(seen, (key, value) => (typeof value === "number" ? round(value) : value));
  }

  function fail(message) {
    const text = String(message instanceof Error ? message.message : message);
    seen.errors.push(text);
    if (source !== null) {
      source.close();
    }
    $("error").hidden = false;
    $("error").textContent = "The stream failed: " + text;
    setState("failed");
    $("status").hidden = true;          // the reason is said once, in #error
    publish();
  }

  function note(text) {
    const item = document.createElement("li");
    item.textContent = text;
    $("connections").appendChild(item);
  }

  // ---------------------------------------------------------------- the chart

  function x(t, end) {
    return (1000 * t / end).toFixed(1);
  }

  // The tokens this page's stream carries: the address's `tokens`, else the server's default.
  function asked() {
    const tokens = Number(new URLSearchParams(location.search).get("tokens"));
    return Number.isInteger(tokens) && tokens > 0 ? tokens : Number(body.defaultTokens);
  }

  // Say how much of the answer the stream carries: `tokens` of the answer's body[data-answer-tokens].
  function shown(tokens) {
    const whole = Number(body.answerTokens);
    const note = $("shown");
    if (tokens >= whole) {
      note.textContent = "The whole answer: " + whole + " tokens.";
      return;
    }
    const query = new URLSearchParams(location.search);
    query.set("tokens", String(whole));
    query.delete("cut_after");
    const link = document.createElement("a");
    link.href = location.pathname + "?" + query.toString();
    link.textContent = "all " + whole;
    note.replaceChildren("The first " + tokens + " of the answer's " + whole + " tokens (tokens=" + tokens
      + " in the address); watch ", link, ".");
  }

  function draw() {
    const total = asked();
    const end = Math.max(1000, now(), ...points.map((p) => p[0]));
    const top = Math.max(total, points.length);
    $("line").setAttribute("points", points.map((p) => x(p[0], end) + "," + (1000 - 1000 * p[1] / top).toFixed(1))
      .join(" "));
    const shades = $("shades");
    shades.replaceChildren();
    for (const span of seen.outages_ms.concat(outage === null ? [] : [[outage.from, now()]])) {
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("class", "shade");
      rect.setAttribute("x", x(span[0], end));
      rect.setAttribute("width", Math.max(2, x(span[1], end) - x(span[0], end)));
      rect.setAttribute("y", "0");
      rect.setAttribute("height", "1000");
      shades.appendChild(rect);
    }
    $("x-max").textContent = Math.round(end) + " ms";
    $("y-max").textContent = String(top);
  }

  // ---------------------------------------------------------------- outages

  function outageStarts() {
    const waitMs = Number(body.retryMs) || 750;
    outage = { from: now(), until: now() + waitMs, timer: null };
    const tick = () => {
      const left = Math.max(0, outage.until - now());
      say("Connection cut after id " + lastId + ". The browser reconnects in " + Math.ceil(left / 100) / 10
        + " s with Last-Event-ID: " + lastId + ".");
      draw();
    };
    tick();
    outage.timer = setInterval(tick, TICK_MS);
  }

  function outageEnds() {
    if (outage === null) {
      return;
    }
    clearInterval(outage.timer);
    seen.outages_ms.push([outage.from, now()]);
    outage = null;
  }

  // ---------------------------------------------------------------- retries

  // The server's Retry-After, in whole seconds: the header when the answer can be read, else the page's.
  function retryAfter(response) {
    const header = response === null ? null : response.headers.get("Retry-After");
    const value = header === null ? NaN : Number(header);
    const fallback = Number(body.retryAfterS);
    if (Number.isInteger(value) && value >= 0 && value <= MAX_WAIT_S) {
      return value;
    }
    return Number.isInteger(fallback) && fallback >= 0 ? Math.min(fallback, MAX_WAIT_S) : 1;
  }

  // Try `again` after `waitS` seconds, unless MAX_TRIES refusals in a row have been tried already.
  // `reason`: the server's words for the refusal, when its answer could be read (else null).
  function retry(what, status, waitS, again, reason) {
    refusal = status === null ? null : String(status) + (reason ? ": " + reason : "");
    if (tries >= MAX_TRIES) {
      fail(what + " was refused " + (tries + 1) + " times in a row" + (refusal === null ? "" : " (" + refusal + ")")
        + "; the page gave up");
      return;
    }
    tries += 1;
    seen.retries.push({ what: what, status: status, wait_s: waitS, try: tries, last_event_id: lastId });
    const words = what + " refused" + (refusal === null ? "" : " (" + refusal + ")") + "; trying again in " + waitS
      + " s" + (lastId === null ? "" : " after id " + lastId) + " (try " + tries + " of " + MAX_TRIES + ")";
    note(words);
    $("retries").textContent = String(seen.retries.length);
    setState("waiting", "Waiting: " + words + ".");
    publish();
    setTimeout(again, waitS * 1000);
  }

  // ---------------------------------------------------------------- events

  function onOpenFrame(event) {
    // The server's own "open" event (a MessageEvent with JSON data); the
    // EventSource also fires a plain "open" Event when a connection opens.
    if (typeof event.data !== "string") {
      return;
    }
    const info = JSON.parse(event.data);
    seen.connections.push({
      resumed: info.resumed, start_index: info.start_index, last_event_id_sent: info.resumed ? lastId : null,
    });
    tries = 0;
    outageEnds();
    const sent = pageResumed ? "the page asked for ?last_event_id=" : "the browser sent Last-Event-ID: ";
    pageResumed = false;
    const words = info.resumed
      ? "Reconnected: " + sent + lastId + ", the server resumed at index " + info.start_index + "."
      : "Connected: stream " + info.stream_id + ", policy " + info.policy + ", buffer " + info.buffer + ".";
    note(words);
    if (info.resumed) {
      resumedAt = info.start_index;
      $("reconnects").textContent = String(seen.connections.length - 1);
      const mark = document.createElement("span");
      mark.className = "cut";
      mark.textContent = "resumed after id " + lastId;
      $("answer").appendChild(mark);
    }
    setState("streaming", words + " Streaming.");
  }

  // Every numbered event (a token, or any other part) is timed, counted and listed the same way.
  function arrived(event, shown) {
    const at = now();
    const id = Number(event.lastEventId);
    if (seen.ttft_ms === null) {
      seen.ttft_ms = at;
      $("ttft").textContent = ms(at);
    }
    let gap = null;
    if (lastArrival !== null) {
      gap = at - lastArrival;
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
    lastArrival = at;
    lastId = event.lastEventId;
    seen.ids.push(id);
    points.push([at, seen.ids.length]);
    const row = document.createElement("tr");
    if (id === resumedAt) {
      row.className = "resumed";
    }
    for (const cell of [String(id), shown, gap === null ? "-" : gap.toFixed(2)]) {
      const td = document.createElement("td");
      td.textContent = cell;
      row.appendChild(td);
    }
    $("frames").appendChild(row);
    $("count").textContent = String(seen.ids.length);
    $("last-id").textContent = lastId;
    draw();
  }

  function piece(className, text) {
    const span = document.createElement("span");
    span.className = className;
    span.textContent = text;
    $("answer").appendChild(span);
    return span;
  }

  function onToken(event) {
    arrived(event, JSON.stringify(event.data));
    seen.text += event.data;
    piece("tok", event.data);
  }

  // A part that is not text (reasoning, a tool call and its result, a step, usage, the finish...): its event is
  // named after its kind and its data is the part's JSON.  Reasoning is shown in its own style, a tool call as
  // name(arguments) as they arrive, its result after it; usage and the finish are kept for the result.
  let toolArgs = null;      // the span the open tool call's arguments are written into
  function onPart(event) {
    const part = JSON.parse(event.data);
    arrived(event, event.type + " " + event.data);
    seen.parts[part.type] = (seen.parts[part.type] || 0) + 1;
    if (part.type === "reasoning") {
      piece("reasoning", part.text);
    } else if (part.type === "refusal") {
      piece("refusal", part.text);
    } else if (part.type === "tool-call-start") {
      const call = piece("tool-call", part.name + "(");
      toolArgs = document.createElement("code");
      call.appendChild(toolArgs);
      call.appendChild(document.createTextNode(")"));
    } else if (part.type === "tool-call-delta" && toolArgs !== null) {
      toolArgs.textContent += part.arguments;
    } else if (part.type === "tool-call-end") {
      toolArgs = null;
    } else if (part.type === "tool-result") {
      piece("tool-result", part.error === undefined ? "\u2192 " + JSON.stringify(part.output) : "\u2717 " + part.error);
    } else if (part.type === "step") {
      piece("step", "next step");
    } else if (part.type === "usage" || part.type === "finish") {
      seen[part.type] = part;
    }
  }

  function summary() {
    const ids = seen.ids;
    const contiguous = ids.every((id, i) => id === i);
    const rows = [
      ["tokens", ids.length + (seen.done ? " of " + seen.done.tokens : "")],
      ["ids", contiguous ? "0.." + (ids.length - 1) + ", in order, none repeated" : "NOT contiguous: see the JSON"],
      ["reconnects", String(seen.connections.length - 1)],
      ["outages", seen.outages_ms.map((s) => Math.round(s[1] - s[0]) + " ms").join(", ") || "none"],
      ["time to first token", ms(seen.ttft_ms)],
      ["gaps p50 / max", seen.gaps_ms.length ? ms(median(seen.gaps_ms)) + " / " + ms(Math.max(...seen.gaps_ms)) : "-"],
    ];
    const list = $("summary");
    list.replaceChildren();
    for (const [name, value] of rows) {
      const dt = document.createElement("dt");
      const dd = document.createElement("dd");
      dt.textContent = name;
      dd.textContent = value;
      list.append(dt, dd);
    }
  }

  function onDone(event) {
    source.close();           // an EventSource left open would reconnect after the stream ends
    seen.done = JSON.parse(event.data);
    const typed = Object.keys(seen.parts).length > 0;      // an answer with parts: its tokens are fewer than ids
    shown(typed ? asked() : seen.done.tokens);
    summary();
    draw();
    const reconnects = seen.connections.length - 1;
    setState("done", "Done: " + seen.ids.length + (typed ? " parts, " : " tokens, ") + reconnects
      + (reconnects === 1 ? " reconnect." : " reconnects."));
    publish();
  }

  function onFailed(event) {
    // The server's "failed" event: the model failed, and the stream ends here (no reconnect).
    fail(JSON.parse(event.data).error);
  }

  function onError() {
    // The EventSource's own "error" (a plain Event, never from the server): the connection dropped.
    if (source.readyState === EventSource.CLOSED) {
      // The browser gave up on this connection (it was answered, but not with 200) and will not retry.
      outageEnds();
      retry("the events connection", null, retryAfter(null), connect);
      return;
    }
    note("Connection lost after id " + lastId + "; the browser reconnects with Last-Event-ID: " + lastId + ".");
    setState("reconnecting");
    outageStarts();
  }

  function connect() {
    const url = lastId === null ? eventsUrl : eventsUrl + "?last_event_id=" + encodeURIComponent(lastId);
    pageResumed = lastId !== null;
    source = new EventSource(url);
    source.addEventListener("open", onOpenFrame);
    source.addEventListener("token", onToken);
    for (const kind of PART_KINDS) {
      source.addEventListener(kind, onPart);
    }
    source.addEventListener("done", onDone);
    source.addEventListener("failed", onFailed);
    source.addEventListener("error", onError);
  }

  function open(info) {
    seen.stream_id = info.stream_id;
    $("stream-id").textContent = info.stream_id;
    eventsUrl = info.events_url;
    connect();
  }

  // The page's own query, with its watchable pace when the address names none.
  function streamQuery() {
    const query = new URLSearchParams(location.search);
    if (!query.has("producer_ms")) {
      query.set("producer_ms", body.paceMs);
    } else {
      $("pace-ms").textContent = query.get("producer_ms");
    }
    return "?" + query.toString();
  }

  function links() {
    const query = new URLSearchParams(location.search);
    query.delete("last_event_id");
    query.delete("parts");              // the live stream's, not the report's
    query.set("format", "html");
    $("report-link").href = "/?" + query.toString();
    $("again").href = location.pathname + location.search;
  }

  function start() {
    fetch("/streams" + streamQuery(), { method: "POST" })
      .then((response) => {
        if (response.status === 503) {
          const wait = retryAfter(response);
          return response.json().then((answer) => answer.error, () => null)
            .then((reason) => retry("POST /streams", 503, wait, start, reason))
            .then(() => null);
        }
        return response.json().then((answer) => {
          if (!response.ok) {
            throw new Error("the server refused to create the stream (" + response.status + "): " + answer.error);
          }
          tries = 0;
          return answer;
        });
      })
      .then((info) => {
        if (info !== null) {
          open(info);
        }
      })
      .catch(fail);
  }

  links();
  shown(asked());
  draw();
  setState("starting", "Starting: creating the stream.");
  start();
})();
