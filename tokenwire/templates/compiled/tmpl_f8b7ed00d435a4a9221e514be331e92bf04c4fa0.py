from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'live.html'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_retry_after_s = resolve('retry_after_s')
    l_0_retry_ms = resolve('retry_ms')
    l_0_pace_ms = resolve('pace_ms')
    l_0_answer_tokens = resolve('answer_tokens')
    l_0_default_tokens = resolve('default_tokens')
    l_0_heartbeat_s = resolve('heartbeat_s')
    l_0_live_params = resolve('live_params')
    try:
        t_1 = environment.filters['default']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'default' found.")
    pass
    yield '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>tokenwire live: a token stream over a real socket</title>\n<link rel="icon" href="data:,">\n<link rel="stylesheet" href="/static/live.css">\n<script src="/static/live.js" defer></script>\n</head>\n<body data-state="starting" data-retry-after-s="'
    yield escape((undefined(name='retry_after_s') if l_0_retry_after_s is missing else l_0_retry_after_s))
    yield '" data-retry-ms="'
    yield escape(t_1((undefined(name='retry_ms') if l_0_retry_ms is missing else l_0_retry_ms), 750))
    yield '" data-pace-ms="'
    yield escape(t_1((undefined(name='pace_ms') if l_0_pace_ms is missing else l_0_pace_ms), 25))
    yield '" data-answer-tokens="'
    yield escape((undefined(name='answer_tokens') if l_0_answer_tokens is missing else l_0_answer_tokens))
    yield '" data-default-tokens="'
    yield escape((undefined(name='default_tokens') if l_0_default_tokens is missing else l_0_default_tokens))
    yield '">\n<main>\n<header>\n<h1>A token stream over a real socket <small>tokenwire live</small></h1>\n<nav aria-label="other pages"><a id="report-link" href="/?format=html">The report for these parameters</a> &middot; <a id="again" href="/live">Run again</a></nav>\n<noscript><p class="note">This page needs JavaScript: it opens the stream with the browser\'s own <code>EventSource</code>. Without it, watch the same stream as text with <code>curl -N \'http://127.0.0.1:8000/stream?cut_after=18\'</code> (this server\'s address), or read <a href="/?format=html">the report</a>, which needs no script.</p></noscript>\n<p>This page creates a stream (<code>POST /streams</code> with this page\'s query string), opens it with\nthe browser\'s own <code>EventSource</code> and shows every token as it arrives, with its event id.\nIf the server cuts the connection (<code>cut_after</code>), the browser reconnects by itself after\n<code>retry</code> ('
    yield escape(t_1((undefined(name='retry_ms') if l_0_retry_ms is missing else l_0_retry_ms), 750))
    yield ' ms) and sends <code>Last-Event-ID</code>; the server carries on from the next index.</p>\n<p id="pace" class="note">The model here makes one token every <strong id="pace-ms">'
    yield escape(t_1((undefined(name='pace_ms') if l_0_pace_ms is missing else l_0_pace_ms), 25))
    yield "</strong> ms unless the address says otherwise (<code>producer_ms</code>), slow enough to watch; the report's own default is 0.5 ms.</p>\n<details><summary>More about this page</summary>\n<p>A silent stream gets a <code>: ping</code> comment every "
    yield escape((undefined(name='heartbeat_s') if l_0_heartbeat_s is missing else l_0_heartbeat_s))
    yield ' s, which the browser does not show.\nA refused request (a full server answers 503) is tried again after '
    yield escape((undefined(name='retry_after_s') if l_0_retry_after_s is missing else l_0_retry_after_s))
    yield " s (the server's\n<code>Retry-After</code>), resuming after the last id received.\nLive-only parameters: "
    yield escape((undefined(name='live_params') if l_0_live_params is missing else l_0_live_params))
    yield '; the rest are the report\'s.</p>\n</details>\n</header>\n<section aria-labelledby="h-status">\n<h2 id="h-status">Status</h2>\n<p id="status" class="status" role="status" aria-live="polite">Starting: creating the stream.</p>\n<p id="error" class="bad" role="alert" hidden></p>\n<dl class="figures">\n<dt>stream</dt><dd id="stream-id">-</dd>\n<dt>state</dt><dd id="state">starting</dd>\n<dt>tokens</dt><dd id="count">0</dd>\n<dt>last id</dt><dd id="last-id">-</dd>\n<dt>reconnects</dt><dd id="reconnects">0</dd>\n<dt>refused and tried again</dt><dd id="retries">0</dd>\n<dt>time to first token</dt><dd id="ttft">-</dd>\n<dt>last gap</dt><dd id="gap">-</dd>\n<dt>gaps p50 / max</dt><dd id="gaps">-</dd>\n</dl>\n</section>\n<section aria-labelledby="h-chart">\n<h2 id="h-chart">Arrivals</h2>\n<figure class="chart" id="arrivals-figure">\n<svg id="arrivals" xmlns="http://www.w3.org/2000/svg" width="100%" height="220" role="img" aria-label="Tokens received over time; shaded: the connection was down">\n<title>Tokens received over time; shaded: the connection was down</title>\n<text class="axis-title" x="4" y="12">tokens received</text>\n<svg id="plot" x="0" y="22" width="100%" height="164" viewBox="0 0 1000 1000" preserveAspectRatio="none">\n<line class="axis" x1="0" x2="1000" y1="1000" y2="1000"/><line class="axis" x1="0" x2="0" y1="0" y2="1000"/>\n<g id="shades"></g>\n<polyline id="line" class="s-first" points=""/>\n</svg>\n<text class="tick y-tick" id="y-max" x="-6" y="26" text-anchor="end">-</text>\n<text class="tick" x="0" y="201">0</text>\n<text class="tick" id="x-max" x="100%" y="201" text-anchor="end">-</text>\n<text class="axis-title" x="100%" y="216" text-anchor="end">ms since the page started</text>\n</svg>\n<figcaption>Every token as it arrived; a shaded span is an outage, from the cut to the reconnect. The table under Frames holds the same data.</figcaption>\n</figure>\n</section>\n<section aria-labelledby="h-answer">\n<h2 id="h-answer">The answer, as it arrives</h2>\n<p class="help">A marker shows where the connection was cut and resumed; each token\'s id and gap are in the Frames table below.</p>\n<div id="answer" class="answer"></div>\n<p id="shown" class="help"></p>\n</section>\n<section aria-labelledby="h-conn">\n<h2 id="h-conn">Connections</h2>\n<ol id="connections"></ol>\n</section>\n<section aria-labelledby="h-result">\n<h2 id="h-result">Result</h2>\n<dl class="figures" id="summary"><dt>result</dt><dd>not yet: the stream is still running</dd></dl>\n<details><summary>Everything the page observed, as JSON</summary>\n<pre id="result" tabindex="0" aria-label="the page\'s observations as JSON"></pre>\n</details>\n</section>\n<section aria-labelledby="h-frames">\n<h2 id="h-frames">Frames</h2>\n<div class="scroll frames-box" role="region" aria-label="every token frame: id, token, gap" tabindex="0">\n<table class="frames"><thead><tr><th scope="col">id</th><th scope="col">token</th><th scope="col">gap ms</th></tr></thead><tbody id="frames"></tbody></table>\n</div>\n</section>\n</main>\n</body>\n</html>\n'

blocks = {}
debug_info = '11=25&20=35&21=37&23=39&24=41&26=43'