from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'report.html'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_r = resolve('r')
    l_0_css = resolve('css')
    l_0_charts = resolve('charts')
    l_0_via = resolve('via')
    l_0_live_href = resolve('live_href')
    l_0_serve_url = resolve('serve_url')
    l_0_links = resolve('links')
    l_0_form_action = resolve('form_action')
    l_0_bounds = resolve('bounds')
    l_0_default_cut = resolve('default_cut')
    l_0_other_formats = resolve('other_formats')
    l_0_prose = l_0_p = l_0_block = l_0_c = l_0_d = l_0_delivered_caption = l_0_paragraphs = l_0_table = l_0_chart = l_0_detail_block = l_0_policy_result = l_0_verdict = l_0_holes = missing
    try:
        t_1 = environment.filters['idlist']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'idlist' found.")
    try:
        t_2 = environment.filters['length']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'length' found.")
    try:
        t_3 = environment.filters['ms']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'ms' found.")
    try:
        t_4 = environment.filters['ms1']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'ms1' found.")
    try:
        t_5 = environment.filters['ms_or']
    except KeyError:
        @internalcode
        def t_5(*unused):
            raise TemplateRuntimeError("No filter named 'ms_or' found.")
    try:
        t_6 = environment.filters['num']
    except KeyError:
        @internalcode
        def t_6(*unused):
            raise TemplateRuntimeError("No filter named 'num' found.")
    try:
        t_7 = environment.filters['plural']
    except KeyError:
        @internalcode
        def t_7(*unused):
            raise TemplateRuntimeError("No filter named 'plural' found.")
    try:
        t_8 = environment.filters['times']
    except KeyError:
        @internalcode
        def t_8(*unused):
            raise TemplateRuntimeError("No filter named 'times' found.")
    try:
        t_9 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_9(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    l_0_prose = context.vars['prose'] = environment.get_template('prose.txt', 'report.html')._get_default_module(context)
    context.exported_vars.discard('prose')
    l_0_p = environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'params')
    context.vars['p'] = l_0_p
    context.exported_vars.add('p')
    l_0_block = context.call(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'row'), 'block')
    context.vars['block'] = l_0_block
    context.exported_vars.add('block')
    l_0_c = environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'resume')
    context.vars['c'] = l_0_c
    context.exported_vars.add('c')
    l_0_d = environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detach')
    context.vars['d'] = l_0_d
    context.exported_vars.add('d')
    l_0_delivered_caption = markup_join(('every policy on one time axis; block is slow and whole, the drops fast and short, disconnect whole after its wait', (' (drop-newest and drop-oldest coincide: the same count at the same instants)' if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'same_loss') else ''), ))
    context.vars['delivered_caption'] = l_0_delivered_caption
    context.exported_vars.add('delivered_caption')
    def macro(l_1_text):
        t_10 = []
        if l_1_text is missing:
            l_1_text = undefined("parameter 'text' was not provided", name='text')
        pass
        def t_11(fiter):
            for l_2_line in fiter:
                if context.call(environment.getattr(l_2_line, 'strip')):
                    yield l_2_line
        for l_2_line in t_11(context.call(environment.getattr(l_1_text, 'split'), '\n')):
            _loop_vars = {}
            pass
            t_10.extend((
                '<p>',
                escape(l_2_line),
                '</p>\n',
            ))
        l_2_line = missing
        return concat(t_10)
    context.exported_vars.add('paragraphs')
    context.vars['paragraphs'] = l_0_paragraphs = Macro(environment, macro, 'paragraphs', ('text',), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_t):
        t_12 = []
        if l_1_t is missing:
            l_1_t = undefined("parameter 't' was not provided", name='t')
        pass
        t_12.extend((
            '<div class="scroll" role="region" aria-label="',
            escape(environment.getattr(l_1_t, 'caption')),
            '" tabindex="0">\n<table>\n<caption>',
            escape(environment.getattr(l_1_t, 'caption')),
            '</caption>\n<thead><tr>',
        ))
        for l_2_h in environment.getattr(l_1_t, 'head'):
            _loop_vars = {}
            pass
            t_12.extend((
                '<th scope="col">',
                escape(l_2_h),
                '</th>',
            ))
        l_2_h = missing
        t_12.append(
            '</tr></thead>\n<tbody>\n',
        )
        l_2_loop = missing
        for l_2_row, l_2_loop in LoopContext(environment.getattr(l_1_t, 'rows'), undefined):
            _loop_vars = {}
            pass
            t_12.append(
                '<tr>',
            )
            l_3_loop = missing
            for l_3_cell, l_3_loop in LoopContext(l_2_row, undefined):
                _loop_vars = {}
                pass
                if environment.getattr(l_3_loop, 'first'):
                    pass
                    t_12.extend((
                        '<th scope="row">',
                        escape(l_3_cell),
                        '</th>',
                    ))
                else:
                    pass
                    t_12.extend((
                        '<td>',
                        escape(l_3_cell),
                        '</td>',
                    ))
            l_3_loop = l_3_cell = missing
            t_12.append(
                '</tr>\n',
            )
        l_2_loop = l_2_row = missing
        t_12.append(
            '</tbody>\n</table>\n</div>\n',
        )
        return concat(t_12)
    context.exported_vars.add('table')
    context.vars['table'] = l_0_table = Macro(environment, macro, 'table', ('t',), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_c, l_1_caption):
        t_13 = []
        if l_1_c is missing:
            l_1_c = undefined("parameter 'c' was not provided", name='c')
        if l_1_caption is missing:
            l_1_caption = ''
        pass
        t_13.extend((
            '<figure class="chart">\n<svg xmlns="http://www.w3.org/2000/svg" width="100%" height="',
            escape(environment.getattr(l_1_c, 'height')),
            '" role="img" aria-label="',
            escape(environment.getattr(l_1_c, 'title')),
            '">\n<title>',
            escape(environment.getattr(l_1_c, 'title')),
            '</title>\n<text class="axis-title" x="4" y="12">',
            escape(environment.getattr(l_1_c, 'y_label')),
            '</text>\n<svg x="0" y="',
            escape(environment.getattr(l_1_c, 'top')),
            '" width="100%" height="',
            escape(environment.getattr(l_1_c, 'plot_height')),
            '" viewBox="0 0 1000 1000" preserveAspectRatio="none">\n',
        ))
        for (l_2_y, l_2__, l_2__) in environment.getattr(l_1_c, 'y_ticks'):
            _loop_vars = {}
            pass
            t_13.extend((
                '<line class="grid" x1="0" x2="1000" y1="',
                escape(l_2_y),
                '" y2="',
                escape(l_2_y),
                '"/>\n',
            ))
        l_2_y = l_2__ = missing
        for l_2_m in environment.getattr(l_1_c, 'marks'):
            _loop_vars = {}
            pass
            if environment.getattr(l_2_m, 'shade'):
                pass
                t_13.extend((
                    '<rect class="shade" x="',
                    escape(environment.getattr(l_2_m, 'x')),
                    '" y="0" width="',
                    escape(environment.getattr(l_2_m, 'shade')),
                    '" height="1000"/>',
                ))
            else:
                pass
                t_13.extend((
                    '<line class="mark" x1="',
                    escape(environment.getattr(l_2_m, 'x')),
                    '" x2="',
                    escape(environment.getattr(l_2_m, 'x')),
                    '" y1="0" y2="1000"/>',
                ))
            t_13.append(
                '\n',
            )
        l_2_m = missing
        for l_2_l in environment.getattr(l_1_c, 'lines'):
            _loop_vars = {}
            pass
            if environment.getattr(l_2_l, 'band'):
                pass
                t_13.extend((
                    '<polygon class="band ',
                    escape(environment.getattr(l_2_l, 'css')),
                    '" points="',
                    escape(environment.getattr(l_2_l, 'points')),
                    '"/>',
                ))
            else:
                pass
                t_13.extend((
                    '<polyline class="',
                    escape(environment.getattr(l_2_l, 'css')),
                    '" points="',
                    escape(environment.getattr(l_2_l, 'points')),
                    '"/>',
                ))
            t_13.append(
                '\n',
            )
        l_2_l = missing
        t_13.append(
            '<line class="axis" x1="0" x2="1000" y1="1000" y2="1000"/>\n<line class="axis" x1="0" x2="0" y1="0" y2="1000"/>\n</svg>\n',
        )
        for (l_2__, l_2_py, l_2_label) in environment.getattr(l_1_c, 'y_ticks'):
            _loop_vars = {}
            pass
            t_13.extend((
                '<text class="tick y-tick" x="-6" y="',
                escape(l_2_py),
                '" text-anchor="end">',
                escape(l_2_label),
                '</text>\n',
            ))
        l_2__ = l_2_py = l_2_label = missing
        for l_2_m in environment.getattr(l_1_c, 'marks'):
            _loop_vars = {}
            pass
            t_13.extend((
                '<text class="mark-label" x="',
                escape(environment.getattr(l_2_m, 'pos')),
                '%" y="',
                escape(environment.getattr(l_2_m, 'label_y')),
                '" text-anchor="',
                escape(environment.getattr(l_2_m, 'anchor')),
                '">',
                escape(environment.getattr(l_2_m, 'label')),
                '</text>\n',
            ))
        l_2_m = missing
        for (l_2_pos, l_2_label, l_2_anchor) in environment.getattr(l_1_c, 'x_ticks'):
            _loop_vars = {}
            pass
            t_13.extend((
                '<text class="tick" x="',
                escape(l_2_pos),
                '%" y="',
                escape(environment.getattr(l_1_c, 'tick_y')),
                '" text-anchor="',
                escape(l_2_anchor),
                '">',
                escape(l_2_label),
                '</text>\n',
            ))
        l_2_pos = l_2_label = l_2_anchor = missing
        t_13.extend((
            '<text class="axis-title" x="100%" y="',
            escape(environment.getattr(l_1_c, 'x_label_y')),
            '" text-anchor="end">',
            escape(environment.getattr(l_1_c, 'x_label')),
            '</text>\n</svg>\n',
        ))
        if (t_2(environment.getattr(l_1_c, 'lines')) > 1):
            pass
            t_13.append(
                '<ul class="key">',
            )
            for l_2_l in environment.getattr(l_1_c, 'lines'):
                _loop_vars = {}
                pass
                t_13.extend((
                    '<li><span class="swatch ',
                    escape(environment.getattr(l_2_l, 'css')),
                    '"></span>',
                    escape(environment.getattr(l_2_l, 'label')),
                    '</li>',
                ))
            l_2_l = missing
            t_13.append(
                '</ul>\n',
            )
        t_13.extend((
            '<figcaption>',
            escape(environment.getattr(l_1_c, 'title')),
        ))
        if l_1_caption:
            pass
            t_13.extend((
                ': ',
                escape(l_1_caption),
            ))
        t_13.extend((
            "</figcaption>\n<details><summary>The chart's data as a table</summary>\n",
            escape(context.call((undefined(name='table') if l_0_table is missing else l_0_table), environment.getattr(l_1_c, 'table'))),
            '\n</details>\n</figure>\n',
        ))
        return concat(t_13)
    context.exported_vars.add('chart')
    context.vars['chart'] = l_0_chart = Macro(environment, macro, 'chart', ('c', 'caption'), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_det):
        t_14 = []
        if l_1_det is missing:
            l_1_det = undefined("parameter 'det' was not provided", name='det')
        pass
        t_14.extend((
            '<div class="detail" id="detail">\n<h3>Detail for ',
            escape(environment.getattr(l_1_det, 'scenario')),
            ': the ',
            escape(environment.getattr(l_1_det, 'run')),
            ' run, ',
            escape(environment.getattr(l_1_det, 'shown')),
            ' of its ',
            escape(environment.getattr(l_1_det, 'decisions')),
            ' channel decisions</h3>\n<p>t: when the producer\'s offer was decided; depth: tokens queued after it; waited: how long the producer was held first; read: when the reader got that token (from the log if it was replayed).</p>\n<dl class="legend">\n',
        ))
        for (l_2_name, l_2_meaning) in environment.getattr(l_1_det, 'legend'):
            _loop_vars = {}
            pass
            t_14.extend((
                '<dt>',
                escape(l_2_name),
                '</dt><dd>',
                escape(l_2_meaning),
                '</dd>\n',
            ))
        l_2_name = l_2_meaning = missing
        t_14.append(
            '</dl>\n<div class="scroll" role="region" aria-label="the channel\'s decisions" tabindex="0">\n<table>\n<thead><tr><th scope="col">index</th><th scope="col">t ms</th><th scope="col" class="text">decision</th><th scope="col">depth</th><th scope="col">waited ms</th><th scope="col">read ms</th></tr></thead>\n<tbody>\n',
        )
        for l_2_row in environment.getattr(l_1_det, 'rows'):
            _loop_vars = {}
            pass
            if t_9(l_2_row):
                pass
                t_14.append(
                    '<tr><td>&hellip;</td><td></td><td></td><td></td><td></td><td></td></tr>\n',
                )
            else:
                pass
                t_14.extend((
                    '<tr><td>',
                    escape(environment.getattr(l_2_row, 'index')),
                    '</td><td>',
                    escape(t_3(environment.getattr(l_2_row, 't_ms'))),
                    '</td><td class="text">',
                    escape(environment.getattr(l_2_row, 'label')),
                    '</td><td>',
                    escape(environment.getattr(l_2_row, 'depth')),
                    '</td><td>',
                    escape(t_3(environment.getattr(l_2_row, 'waited_ms'))),
                    '</td><td>',
                    escape(t_5(environment.getattr(l_2_row, 'read_ms'), 'never')),
                    '</td></tr>\n',
                ))
        l_2_row = missing
        t_14.append(
            '</tbody>\n</table>\n</div>\n',
        )
        if (environment.getattr(l_1_det, 'section') == 4):
            pass
            t_14.extend((
                '<p>The reader hung up at ',
                escape(t_4(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'hang_up_ms'))),
                ' ms, after id ',
                escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'last_event_id_shown')),
                ', and reconnected at ',
                escape(t_4(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'reconnect_ms'))),
                ' ms with <code>',
                escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'sent_header')),
                '</code>; the ',
                escape(t_7(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'replayed'), 'token')),
                ' already in the log came from there, the rest through a new channel.</p>\n',
            ))
        t_14.append(
            '</div>\n',
        )
        return concat(t_14)
    context.exported_vars.add('detail_block')
    context.vars['detail_block'] = l_0_detail_block = Macro(environment, macro, 'detail_block', ('det',), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_row):
        t_15 = []
        if l_1_row is missing:
            l_1_row = undefined("parameter 'row' was not provided", name='row')
        pass
        if (environment.getattr(l_1_row, 'policy') == 'block'):
            pass
            t_15.extend((
                'Under block the reader got all ',
                escape(t_7(environment.getattr(l_1_row, 'delivered'), 'token')),
                ' in ',
                escape(t_4(environment.getattr(l_1_row, 'wall_ms'))),
                ' ms; ',
            ))
            if environment.getattr(l_1_row, 'pauses'):
                pass
                t_15.extend((
                    'the producer waited ',
                    escape(t_4(environment.getattr(l_1_row, 'producer_waited_ms'))),
                    ' ms across ',
                    escape(t_7(environment.getattr(l_1_row, 'pauses'), 'pause')),
                    '.',
                ))
            else:
                pass
                t_15.append(
                    'the producer never had to wait.',
                )
        elif environment.getattr(l_1_row, 'dropped'):
            pass
            t_15.extend((
                'Under ',
                escape(environment.getattr(l_1_row, 'policy')),
                ' the run finished in ',
                escape(t_4(environment.getattr(l_1_row, 'wall_ms'))),
                ' ms and lost ',
                escape(t_7(environment.getattr(l_1_row, 'dropped'), 'token')),
                ' in ',
                escape(t_7(environment.getattr(l_1_row, 'gap_runs'), 'run')),
                ': ',
            ))
            if (environment.getattr(l_1_row, 'policy') == 'drop-newest'):
                pass
                t_15.append(
                    'a full buffer turned each new token away.',
                )
            else:
                pass
                t_15.append(
                    'a full buffer evicted its oldest token, so the reader ends on the newest ones.',
                )
        elif environment.getattr(l_1_row, 'cuts'):
            pass
            t_15.extend((
                'Under disconnect the reader was cut off ',
                escape(t_8(environment.getattr(l_1_row, 'cuts'))),
                ' when the buffer filled; it came back ',
                escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'retry_ms')),
                ' ms after each cut (the retry its open frame set) and resumed from the log: ',
                escape(environment.getattr(l_1_row, 'delivered')),
                ' of ',
                escape(t_7(environment.getattr(l_1_row, 'total'), 'token')),
                ', none lost, in ',
                escape(t_4(environment.getattr(l_1_row, 'wall_ms'))),
                " ms against block's ",
                escape(t_4(environment.getattr((undefined(name='block') if l_0_block is missing else l_0_block), 'wall_ms'))),
                ' ms. Its cost is wall time, not tokens.\n',
            ))
        else:
            pass
            t_15.extend((
                'Under ',
                escape(environment.getattr(l_1_row, 'policy')),
                ' the run finished in ',
                escape(t_4(environment.getattr(l_1_row, 'wall_ms'))),
                ' ms and ',
            ))
            if (environment.getattr(l_1_row, 'policy') == 'disconnect'):
                pass
                t_15.append(
                    'never cut the reader off',
                )
            else:
                pass
                t_15.append(
                    'lost nothing',
                )
            t_15.append(
                ': the buffer never overflowed.\n',
            )
        return concat(t_15)
    context.exported_vars.add('policy_result')
    context.vars['policy_result'] = l_0_policy_result = Macro(environment, macro, 'policy_result', ('row',), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_row):
        t_16 = []
        if l_1_row is missing:
            l_1_row = undefined("parameter 'row' was not provided", name='row')
        pass
        t_16.extend((
            '<strong>',
            escape(environment.getattr(l_1_row, 'policy')),
            '</strong>: ',
        ))
        if environment.getattr(l_1_row, 'dropped'):
            pass
            t_16.extend((
                escape(environment.getattr(l_1_row, 'delivered')),
                ' of ',
                escape(t_7(environment.getattr(l_1_row, 'total'), 'token')),
                ' in ',
                escape(t_4(environment.getattr(l_1_row, 'wall_ms'))),
                ' ms, ',
                escape(environment.getattr(l_1_row, 'dropped')),
                ' lost in ',
                escape(t_7(environment.getattr(l_1_row, 'gap_runs'), 'run')),
            ))
        else:
            pass
            t_16.extend((
                'all ',
                escape(t_7(environment.getattr(l_1_row, 'total'), 'token')),
                ' in ',
                escape(t_4(environment.getattr(l_1_row, 'wall_ms'))),
                ' ms',
            ))
            if environment.getattr(l_1_row, 'cuts'):
                pass
                t_16.extend((
                    " against block's ",
                    escape(t_4(environment.getattr((undefined(name='block') if l_0_block is missing else l_0_block), 'wall_ms'))),
                    ': cut off ',
                    escape(t_8(environment.getattr(l_1_row, 'cuts'))),
                    ', back ',
                    escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'retry_ms')),
                    ' ms after each cut',
                ))
            elif environment.getattr(l_1_row, 'pauses'):
                pass
                t_16.extend((
                    ', the producer held back ',
                    escape(t_4(environment.getattr(l_1_row, 'producer_waited_ms'))),
                    ' ms',
                ))
            else:
                pass
                t_16.append(
                    ', nothing lost',
                )
        t_16.append(
            '.\n',
        )
        return concat(t_16)
    context.exported_vars.add('verdict')
    context.vars['verdict'] = l_0_verdict = Macro(environment, macro, 'verdict', ('row',), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_row):
        t_17 = []
        if l_1_row is missing:
            l_1_row = undefined("parameter 'row' was not provided", name='row')
        pass
        t_17.extend((
            '<figure>\n<figcaption>',
            escape(environment.getattr(l_1_row, 'policy')),
            ': what the reader got; each marked hole is text it never received (',
            escape(t_7(environment.getattr(l_1_row, 'dropped'), 'token')),
            ' in ',
            escape(t_7(environment.getattr(l_1_row, 'gap_runs'), 'run')),
            ')</figcaption>\n<p class="answer">',
        ))
        for (l_2_text, l_2_lost) in environment.getattr(l_1_row, 'pieces'):
            _loop_vars = {}
            pass
            if l_2_lost:
                pass
                t_17.extend((
                    '<span class="hole" role="img" aria-label="',
                    escape(l_2_lost),
                    ' ',
                    escape(('token' if (l_2_lost == 1) else 'tokens')),
                    ' lost">',
                    escape(l_2_lost),
                    ' lost</span>',
                ))
            else:
                pass
                t_17.append(
                    escape(l_2_text),
                )
        l_2_text = l_2_lost = missing
        t_17.append(
            '</p>\n</figure>\n',
        )
        return concat(t_17)
    context.exported_vars.add('holes')
    context.vars['holes'] = l_0_holes = Macro(environment, macro, 'holes', ('row',), False, False, False, context.eval_ctx.autoescape)
    yield '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>tokenwire: streaming, backpressure and resume ('
    yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'scenario'))
    yield ')</title>\n<link rel="icon" href="data:,">\n<style>'
    yield escape((undefined(name='css') if l_0_css is missing else l_0_css))
    yield '</style>\n</head>\n<body>\n<main>\n<header>\n<h1>Streaming, backpressure and resume <small>protocol and buffers, no socket</small></h1>\n</header>\n<section id="result" class="lead" aria-labelledby="h-result">\n<h2 id="h-result">Result: '
    yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'scenario'))
    yield '</h2>\n'
    if (environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'lead') == 'arrivals'):
        pass
        yield '<p class="verdict"><strong>baseline</strong>: all '
        yield escape(t_7(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'tokens'), 'token'))
        yield ' in '
        yield escape(t_3(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'total_ms')))
        yield ' ms at a fast reader, the first after '
        yield escape(t_3(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'ttft_ms')))
        yield ' ms; '
        yield escape(t_4(environment.getattr((undefined(name='block') if l_0_block is missing else l_0_block), 'wall_ms')))
        yield ' ms at the slow one.</p>\n'
        yield escape(context.call((undefined(name='chart') if l_0_chart is missing else l_0_chart), environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'arrivals'), "the fast reader's line is the model's own pace; the slow reader's is the reader's"))
        yield '\n'
    else:
        pass
        yield '<p class="verdict">'
        yield escape(context.call((undefined(name='verdict') if l_0_verdict is missing else l_0_verdict), context.call(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'row'), environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'scenario'))))
        yield '</p>\n'
        yield escape(context.call((undefined(name='chart') if l_0_chart is missing else l_0_chart), environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'delivered'), (undefined(name='delivered_caption') if l_0_delivered_caption is missing else l_0_delivered_caption)))
        yield '\n'
    yield '</section>\n<div class="intro">\n<div class="lede">\n'
    yield escape(context.call((undefined(name='paragraphs') if l_0_paragraphs is missing else l_0_paragraphs), context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'intro'), (undefined(name='via') if l_0_via is missing else l_0_via))))
    yield '\n</div>\n'
    if (undefined(name='live_href') if l_0_live_href is missing else l_0_live_href):
        pass
        yield '<p class="live-link"><a href="'
        yield escape((undefined(name='live_href') if l_0_live_href is missing else l_0_live_href))
        yield '">Watch this stream live</a>: the same answer over a real socket, cut after '
        yield escape(t_7(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'cut_after'), 'token'))
        yield ' and resumed with <code>Last-Event-ID</code>.</p>\n'
    yield '</div>\n<nav aria-label="scenario and parameters">\n'
    if environment.getattr((undefined(name='via') if l_0_via is missing else l_0_via), 'command'):
        pass
        yield '<p class="help">Saved by <code>tokenwire report</code>: opened from a file, the scenario links and the form below go to <code>tokenwire serve</code> at <a href="'
        yield escape((undefined(name='serve_url') if l_0_serve_url is missing else l_0_serve_url))
        yield '?format=html">'
        yield escape((undefined(name='serve_url') if l_0_serve_url is missing else l_0_serve_url))
        yield '</a> (its default address), so start <code>tokenwire serve</code> to use them.</p>\n'
    yield '<ul>\n'
    for (l_1_name, l_1_href, l_1_current) in (undefined(name='links') if l_0_links is missing else l_0_links):
        _loop_vars = {}
        pass
        yield '<li><a href="'
        yield escape(l_1_href)
        yield '"'
        if l_1_current:
            pass
            yield ' aria-current="page"'
        yield '>'
        yield escape(l_1_name)
        yield '</a></li>\n'
    l_1_name = l_1_href = l_1_current = missing
    yield '</ul>\n<form method="get" action="'
    yield escape((undefined(name='form_action') if l_0_form_action is missing else l_0_form_action))
    yield '">\n<label>scenario <select name="scenario">'
    for (l_1_name, l_1_href, l_1_current) in (undefined(name='links') if l_0_links is missing else l_0_links):
        _loop_vars = {}
        pass
        yield '<option'
        if l_1_current:
            pass
            yield ' selected'
        yield '>'
        yield escape(l_1_name)
        yield '</option>'
    l_1_name = l_1_href = l_1_current = missing
    yield '</select></label>\n<label>clock <select name="clock">'
    for l_1_name in ('virtual', 'real'):
        _loop_vars = {}
        pass
        yield '<option'
        if (l_1_name == environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'clock')):
            pass
            yield ' selected'
        yield '>'
        yield escape(l_1_name)
        yield '</option>'
    l_1_name = missing
    yield '</select></label>\n<label>tokens <input name="tokens" type="number" min="'
    yield escape(environment.getitem(environment.getattr((undefined(name='bounds') if l_0_bounds is missing else l_0_bounds), 'tokens'), 0))
    yield '" max="'
    yield escape(environment.getitem(environment.getattr((undefined(name='bounds') if l_0_bounds is missing else l_0_bounds), 'tokens'), 1))
    yield '" value="'
    yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'tokens'))
    yield '"></label>\n<label>buffer <input name="buffer" type="number" min="1" max="'
    yield escape(environment.getitem(environment.getattr((undefined(name='bounds') if l_0_bounds is missing else l_0_bounds), 'buffer'), 1))
    yield '" value="'
    yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'buffer'))
    yield '"></label>\n<label>reader ms <input name="reader_ms" type="number" min="0" max="'
    yield escape(environment.getitem(environment.getattr((undefined(name='bounds') if l_0_bounds is missing else l_0_bounds), 'reader_ms'), 1))
    yield '" step="any" value="'
    yield escape(t_6(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms')))
    yield '"></label>\n<label>producer ms <input name="producer_ms" type="number" min="'
    yield escape(environment.getitem(environment.getattr((undefined(name='bounds') if l_0_bounds is missing else l_0_bounds), 'producer_ms'), 0))
    yield '" max="'
    yield escape(environment.getitem(environment.getattr((undefined(name='bounds') if l_0_bounds is missing else l_0_bounds), 'producer_ms'), 1))
    yield '" step="any" value="'
    yield escape(t_6(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'producer_ms')))
    yield '"></label>\n<label>cut after <input name="cut_after" type="number" min="0" max="'
    yield escape((environment.getitem(environment.getattr((undefined(name='bounds') if l_0_bounds is missing else l_0_bounds), 'tokens'), 1) - 1))
    yield '" placeholder="default" '
    if (environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'cut_after') != (undefined(name='default_cut') if l_0_default_cut is missing else l_0_default_cut)):
        pass
        yield 'value="'
        yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'cut_after'))
        yield '" '
    yield 'aria-describedby="cut-help"></label>\n<label>seed <input name="seed" type="number" min="0" value="'
    yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'seed'))
    yield '"></label>\n<input type="hidden" name="format" value="html">\n<button type="submit">run</button>\n</form>\n<p id="cut-help" class="help">Cut after: tokens before the connection dies, 0 to tokens&minus;1; left blank, it is '
    yield escape((undefined(name='default_cut') if l_0_default_cut is missing else l_0_default_cut))
    yield ' here (18, or half of an answer of 18 tokens or fewer).</p>\n<p>The same report as '
    l_1_loop = missing
    for (l_1_name, l_1_href), l_1_loop in LoopContext((undefined(name='other_formats') if l_0_other_formats is missing else l_0_other_formats), undefined):
        _loop_vars = {}
        pass
        yield '<a href="'
        yield escape(l_1_href)
        yield '">'
        yield escape(l_1_name)
        yield '</a>'
        if (not environment.getattr(l_1_loop, 'last')):
            pass
            yield ' or '
    l_1_loop = l_1_name = l_1_href = missing
    yield '.</p>\n</nav>\n<dl>\n<dt>you chose</dt><dd>'
    yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'scenario'))
    yield '</dd>\n<dt>question</dt><dd>&lsquo;'
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'question'))
    yield '&rsquo;</dd>\n<dt>answer length</dt><dd>'
    yield escape(t_7(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'tokens'), 'token'))
    yield ', one SSE frame each</dd>\n<dt>buffer</dt><dd>'
    yield escape(t_7(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'buffer'), 'slot'))
    yield ' between the producer and the reader</dd>\n<dt>'
    yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_label'))
    yield '</dt><dd>'
    yield escape(t_6(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms')))
    yield ' ms per token, against a producer that needs '
    yield escape(t_6(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'producer_ms')))
    yield ' ms</dd>\n<dt>clock</dt><dd>'
    yield escape(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'clock'))
    if (environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'clock') == 'virtual'):
        pass
        yield ' (deterministic: the same URL gives the same bytes)'
    else:
        pass
        yield ' (measured now, on the wall clock)'
    yield '</dd>\n</dl>\n<p class="note">'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'trimmed'):
        pass
        yield '<strong>Trimmed for '
        yield escape(environment.getattr((undefined(name='via') if l_0_via is missing else l_0_via), 'this'))
        yield ":</strong> the project's own demo streams the full "
        yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_tokens'))
        yield ' token answer '
        yield escape(t_8(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_repeats')))
        yield ' over a loopback socket with a '
        yield escape(t_6(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_reader_ms')))
        yield ' ms reader, about '
        yield escape(t_6(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_estimate_s')))
        yield ' seconds of wall clock. Here the answer is cut to its first '
        yield escape(t_7(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'tokens'), 'token'))
        yield ' and the reader is '
        yield escape(t_6(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms')))
        yield ' ms per token.'
    else:
        pass
        yield '<strong>Full answer:</strong> '
        yield escape(environment.getattr((undefined(name='via') if l_0_via is missing else l_0_via), 'this'))
        yield ' runs all '
        yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'answer_tokens'))
        yield " tokens, as the project's own demo does ("
        yield escape(t_8(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_repeats')))
        yield ' over a loopback socket with a '
        yield escape(t_6(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_reader_ms')))
        yield ' ms reader); here the reader is '
        yield escape(t_6(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms')))
        yield ' ms per token.'
    yield '\n'
    if (environment.getattr((undefined(name='block') if l_0_block is missing else l_0_block), 'high_water') == environment.getattr((undefined(name='block') if l_0_block is missing else l_0_block), 'capacity')):
        pass
        yield 'The buffer still fills, every policy still makes its decision, and the resume still replays from the last event id.'
    else:
        pass
        yield 'With these parameters the buffer never fills (the reader keeps up), so the policies have nothing to decide; the resume still replays from the last event id.'
    yield '</p>\n\n<section id="wire">\n<h2>1. What actually goes down the wire</h2>\n<p>A fast reader, so nothing is queued. The first frames, exactly as bytes, each one closed by a blank line:</p>\n<pre class="wire" tabindex="0" aria-label="the first frames">'
    for l_1_frame in environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'shown'):
        _loop_vars = {}
        pass
        yield escape(l_1_frame)
    l_1_frame = missing
    if environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'skipped'):
        pass
        yield '&hellip; '
        yield escape(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'skipped'))
        yield ' more frames &hellip;\n'
    yield '</pre>\n<p>And the closing frame:</p>\n<pre class="wire" tabindex="0" aria-label="the closing frame">'
    yield escape(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'closing'))
    yield '</pre>\n'
    if environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'spaced_token'):
        pass
        yield '<p>Two spaces in <code>data:&nbsp;'
        yield escape(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'spaced_token'))
        yield '</code>: the parser strips the one after <code>data:</code>, the token keeps its own.</p>\n'
    yield "<p>Fed back through the project's own parser: <strong>"
    yield escape(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'frames_read'))
    yield '</strong> frames read, <strong>'
    yield escape(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'token_frames'))
    yield '</strong> of them tokens'
    if (not environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'round_trip')):
        pass
        yield ' <span class="bad">(not the tokens that were sent)</span>'
    yield '.</p>\n'
    yield escape(context.call((undefined(name='paragraphs') if l_0_paragraphs is missing else l_0_paragraphs), context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'ids_matter'))))
    yield '\n</section>\n\n<section id="timing">\n<h2>2. Timing <small>a fast reader, nothing in the way</small></h2>\n<dl>\n<dt>time to first token</dt><dd>'
    yield escape(t_3(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'ttft_ms')))
    yield ' ms</dd>\n<dt>whole answer</dt><dd>'
    yield escape(t_3(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'total_ms')))
    yield ' ms</dd>\n<dt>share waiting for the first token</dt><dd>'
    yield escape(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'first_token_percent'))
    yield ' percent</dd>\n<dt>between tokens</dt><dd>'
    if (not t_9(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'itl_p50_ms'))):
        pass
        yield 'p50 '
        yield escape(t_3(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'itl_p50_ms')))
        yield ' ms, p95 '
        yield escape(t_3(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'itl_p95_ms')))
        yield ' ms, worst '
        yield escape(t_3(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'itl_max_ms')))
        yield ' ms'
    else:
        pass
        yield 'none: a single token has no gap'
    yield '</dd>\n<dt>throughput</dt><dd>'
    yield escape(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'tokens_per_s'))
    yield ' tokens per second</dd>\n</dl>\n'
    yield escape(context.call((undefined(name='paragraphs') if l_0_paragraphs is missing else l_0_paragraphs), context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'timing_why'))))
    yield '\n'
    if (environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'lead') == 'arrivals'):
        pass
        yield '<p><a href="#result">The chart at the top</a> shows each token\'s arrival at the fast reader and at the slow one.</p>\n'
    else:
        pass
        yield escape(context.call((undefined(name='chart') if l_0_chart is missing else l_0_chart), environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'arrivals'), "the fast reader's line is the model's own pace; the slow reader's is the reader's"))
        yield '\n'
    if environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'gaps'):
        pass
        yield escape(context.call((undefined(name='chart') if l_0_chart is missing else l_0_chart), environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'gaps'), 'the steeper the climb, the more even the stream; the dashed lines are the p50 and p95 above'))
        yield '\n'
    if (environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail'), 'section') == 2):
        pass
        yield escape(context.call((undefined(name='detail_block') if l_0_detail_block is missing else l_0_detail_block), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail')))
    yield '</section>\n\n<section id="buffer">\n<h2>3. The buffer under a slow reader <small>'
    yield escape(t_7(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'buffer'), 'slot'))
    yield ', '
    yield escape(t_6(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms')))
    yield ' ms per token</small></h2>\n<div class="scroll stack" role="region" aria-label="the buffer under each policy" tabindex="0">\n<table>\n<thead><tr><th scope="col">policy</th><th scope="col">delivered</th><th scope="col">dropped</th><th scope="col">gap runs</th><th scope="col">high water</th><th scope="col">producer waited</th><th scope="col">wall ms</th></tr></thead>\n<tbody>\n'
    for l_1_row in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'buffer'):
        _loop_vars = {}
        pass
        yield '<tr'
        if (environment.getattr(l_1_row, 'policy') == environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'scenario')):
            pass
            yield ' class="chosen"'
        yield '><th scope="row">'
        yield escape(environment.getattr(l_1_row, 'policy'))
        yield '</th><td data-label="delivered">'
        yield escape(environment.getattr(l_1_row, 'delivered'))
        yield ' of '
        yield escape(environment.getattr(l_1_row, 'total'))
        yield '</td><td data-label="dropped">'
        yield escape(environment.getattr(l_1_row, 'dropped'))
        yield '</td><td data-label="gap runs">'
        yield escape(environment.getattr(l_1_row, 'gap_runs'))
        yield '</td><td data-label="high water">'
        yield escape(environment.getattr(l_1_row, 'high_water'))
        yield ' of '
        yield escape(environment.getattr(l_1_row, 'capacity'))
        yield '</td><td data-label="producer waited">'
        yield escape(t_4(environment.getattr(l_1_row, 'producer_waited_ms')))
        yield ' ms</td><td data-label="wall ms">'
        yield escape(t_4(environment.getattr(l_1_row, 'wall_ms')))
        yield '</td></tr>\n'
    l_1_row = missing
    yield '</tbody>\n</table>\n</div>\n<ul>\n'
    for l_1_row in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'buffer'):
        _loop_vars = {}
        pass
        yield '<li>'
        yield escape(context.call((undefined(name='policy_result') if l_0_policy_result is missing else l_0_policy_result), l_1_row, _loop_vars=_loop_vars))
        yield '</li>\n'
    l_1_row = missing
    yield '</ul>\n'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'same_loss'):
        pass
        yield '<p>Drop-newest and drop-oldest both lose '
        yield escape(t_7(environment.getattr(context.call(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'row'), 'drop-newest'), 'dropped'), 'token'))
        yield " here: the reader takes a token at the same instants under both, so each offer to a full buffer costs one token either way. Drop-newest keeps what was queued and turns the new token away; drop-oldest keeps the new token and evicts the oldest queued one, so its reader ends on the answer's last tokens.</p>\n"
    yield escape(context.call((undefined(name='paragraphs') if l_0_paragraphs is missing else l_0_paragraphs), context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'buffer_why'))))
    yield '\n'
    yield escape(context.call((undefined(name='paragraphs') if l_0_paragraphs is missing else l_0_paragraphs), context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'second_queue'), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_buffer'), (undefined(name='via') if l_0_via is missing else l_0_via))))
    yield '\n<h3>Tokens delivered over time</h3>\n'
    if (environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'lead') == 'delivered'):
        pass
        yield '<p><a href="#result">The chart at the top</a> shows the tokens delivered under each policy on one time axis.</p>\n'
    else:
        pass
        yield escape(context.call((undefined(name='chart') if l_0_chart is missing else l_0_chart), environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'delivered'), (undefined(name='delivered_caption') if l_0_delivered_caption is missing else l_0_delivered_caption)))
        yield '\n'
    yield '<h3>Buffer depth over time, per policy, on one time axis</h3>\n<div class="panels">\n'
    for l_1_depth in environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'depth'):
        _loop_vars = {}
        pass
        yield escape(context.call((undefined(name='chart') if l_0_chart is missing else l_0_chart), l_1_depth, _loop_vars=_loop_vars))
        yield '\n'
    l_1_depth = missing
    yield '</div>\n'
    def t_18(fiter):
        for l_1_row in fiter:
            if environment.getattr(l_1_row, 'dropped'):
                yield l_1_row
    for l_1_row in t_18(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'buffer')):
        _loop_vars = {}
        pass
        yield escape(context.call((undefined(name='holes') if l_0_holes is missing else l_0_holes), l_1_row, _loop_vars=_loop_vars))
        yield '\n'
    l_1_row = missing
    if (environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail'), 'section') == 3):
        pass
        yield escape(context.call((undefined(name='detail_block') if l_0_detail_block is missing else l_0_detail_block), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail')))
    yield '</section>\n\n<section id="resume">\n<h2>4. Disconnect and resume <small>the connection dies after '
    yield escape(t_7(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'first_tokens'), 'token'))
    yield '</small></h2>\n<dl>\n<dt>first connection</dt><dd>'
    yield escape(t_7(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'first_tokens'), 'token'))
    yield ', last event id '
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'last_event_id_shown'))
    yield ', completed='
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'first_completed'))
    yield '</dd>\n'
    if (environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect') < environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total')):
        pass
        yield '<dt>producer stopped</dt><dd>the server generated '
        yield escape(t_7(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect'), 'token'))
        yield ' then saw the cancel and stopped, instead of generating all '
        yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total'))
        yield ' into a dead connection</dd>\n'
    else:
        pass
        yield '<dt>producer finished</dt><dd>the server had generated all '
        yield escape(t_7(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total'), 'token'))
        yield ' before the reader left, so the cancel had nothing left to stop</dd>\n'
    yield '<dt>reconnect sends</dt><dd><code>'
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'sent_header'))
    yield '</code></dd>\n<dt>second connection</dt><dd>resumed at index '
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'resumed_at'))
    yield ', '
    yield escape(t_7(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'second_tokens'), 'more token'))
    yield ', completed='
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'completed'))
    yield '</dd>\n<dt>event ids received</dt><dd>'
    yield escape(t_1(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'ids_head')))
    yield ' &hellip; '
    yield escape(t_1(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'ids_tail')))
    yield '</dd>\n<dt>contiguous 0..'
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'last_index'))
    yield '</dt><dd class="'
    yield escape(('ok' if environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'contiguous') else 'bad'))
    yield '">'
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'contiguous'))
    yield '</dd>\n<dt>duplicated ids</dt><dd class="'
    yield escape(('bad' if environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'duplicates') else 'ok'))
    yield '">'
    yield escape((t_1(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'duplicates')) if environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'duplicates') else 'none'))
    yield '</dd>\n<dt>text matches a stream that was never interrupted</dt><dd class="'
    yield escape(('ok' if environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'text_matches') else 'bad'))
    yield '">'
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'text_matches'))
    yield '</dd>\n<dt>model steps</dt><dd>'
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_total'))
    yield ' over both connections'
    if environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_once'):
        pass
        yield ", the answer's length: nothing was generated twice"
    else:
        pass
        yield ': <span class="bad">some index was generated twice</span>'
    yield '</dd>\n</dl>\n<h3>What each choice of on_disconnect cost, measured</h3>\n<dl>\n<dt>cancel</dt><dd>the producer generated '
    yield escape(t_7(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect'), 'token'))
    yield ', '
    yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'replayed'))
    yield ' past what the reader had, then stopped; the reconnect replayed those from the log, '
    if (environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect') < environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total')):
        pass
        yield 'restarted the model at index '
        yield escape(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect'))
        yield ' and '
    yield 'waited '
    yield escape(t_4(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'waited_for_model_ms')))
    yield ' ms for the model ('
    yield escape(t_7(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'second_tokens'), 'token'))
    yield ' in '
    yield escape(t_4(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'catch_up_ms')))
    yield ' ms)</dd>\n<dt>detach</dt><dd>the producer kept going: '
    yield escape(t_7(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'generated_while_away'), 'token'))
    yield ' generated while nobody was reading; the reconnect found '
    yield escape(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'generated_at_reconnect'))
    yield " in the log and caught up at the reader's pace, "
    yield escape(t_7(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'second_tokens'), 'token'))
    yield ' in '
    yield escape(t_4(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'catch_up_ms')))
    yield ' ms, '
    yield escape(t_4(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'waited_for_model_ms')))
    yield ' ms of it waiting for the model; contiguous '
    yield escape(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'contiguous'))
    yield ', duplicated ids '
    yield escape((t_1(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'duplicates')) if environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'duplicates') else 'none'))
    yield ', text matches '
    yield escape(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'text_matches'))
    yield ', '
    yield escape(t_7(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'generated_total'), 'model step'))
    yield '</dd>\n</dl>\n'
    yield escape(context.call((undefined(name='chart') if l_0_chart is missing else l_0_chart), environment.getattr((undefined(name='charts') if l_0_charts is missing else l_0_charts), 'resume'), markup_join(('in the shaded span the reader is away for the retry interval; the ids carry on from ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'resumed_at'), ' with nothing repeated', ))))
    yield '\n'
    yield escape(context.call((undefined(name='paragraphs') if l_0_paragraphs is missing else l_0_paragraphs), context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'resume_why'))))
    yield '\n'
    if (environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail'), 'section') == 4):
        pass
        yield escape(context.call((undefined(name='detail_block') if l_0_detail_block is missing else l_0_detail_block), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail')))
    yield '</section>\n\n<footer>\n'
    yield escape(context.call((undefined(name='paragraphs') if l_0_paragraphs is missing else l_0_paragraphs), context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'closing'), environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'clock'), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'transport'), (undefined(name='via') if l_0_via is missing else l_0_via))))
    if (undefined(name='live_href') if l_0_live_href is missing else l_0_live_href):
        pass
        yield '<p><a href="'
        yield escape((undefined(name='live_href') if l_0_live_href is missing else l_0_live_href))
        yield '">Watch it live</a>.</p>'
    yield '</footer>\n</main>\n</body>\n</html>\n'

blocks = {}
debug_info = '1=77&2=79&3=82&4=85&5=88&6=91&7=94&8=99&9=108&12=115&13=122&15=124&16=127&18=140&19=147&25=175&27=184&28=188&29=190&30=192&31=197&32=202&34=208&35=211&38=233&39=236&45=261&46=266&48=272&49=277&51=287&52=292&54=304&56=309&57=314&59=330&61=340&65=346&67=353&70=362&71=367&78=376&79=379&82=388&88=405&89=409&93=426&94=431&95=435&96=454&97=458&98=477&99=481&101=498&104=519&105=526&107=580&109=587&110=594&118=621&120=623&128=625&129=627&130=630&131=638&133=643&134=645&139=648&141=650&142=653&146=658&147=661&150=666&151=670&154=680&155=682&156=694&157=706&158=712&159=716&160=720&161=726&162=734&166=736&167=739&170=752&171=754&172=756&173=758&174=760&175=766&177=774&179=805&184=812&187=823&188=825&189=828&191=831&192=839&198=841&199=843&200=845&201=847&202=860&204=862&205=864&208=869&210=871&211=873&213=875&217=879&222=883&223=887&229=911&230=915&233=919&234=922&236=924&237=926&239=928&242=933&246=936&247=939&250=943&251=950&253=953&257=957&259=959&260=965&261=968&263=975&265=978&266=980&267=986&268=990&269=996&270=1000&271=1004&275=1013&276=1029&278=1047&279=1049&280=1051&284=1055&285=1059'