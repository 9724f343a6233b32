from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'report.txt'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_r = resolve('r')
    l_0_via = resolve('via')
    l_0_drop = resolve('drop')
    l_0_one = resolve('one')
    l_0_g = resolve('g')
    l_0_prose = l_0_p = l_0_s = l_0_block = l_0_rule = l_0_heading = l_0_detail_block = l_0_columns = l_0_c = l_0_d = missing
    try:
        t_1 = environment.filters['and_list']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'and_list' found.")
    try:
        t_2 = environment.filters['count']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'count' found.")
    try:
        t_3 = environment.filters['format']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'format' found.")
    try:
        t_4 = environment.filters['frame_lines']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'frame_lines' found.")
    try:
        t_5 = environment.filters['hang']
    except KeyError:
        @internalcode
        def t_5(*unused):
            raise TemplateRuntimeError("No filter named 'hang' found.")
    try:
        t_6 = environment.filters['idlist']
    except KeyError:
        @internalcode
        def t_6(*unused):
            raise TemplateRuntimeError("No filter named 'idlist' found.")
    try:
        t_7 = environment.filters['join']
    except KeyError:
        @internalcode
        def t_7(*unused):
            raise TemplateRuntimeError("No filter named 'join' found.")
    try:
        t_8 = environment.filters['length']
    except KeyError:
        @internalcode
        def t_8(*unused):
            raise TemplateRuntimeError("No filter named 'length' found.")
    try:
        t_9 = environment.filters['ms']
    except KeyError:
        @internalcode
        def t_9(*unused):
            raise TemplateRuntimeError("No filter named 'ms' found.")
    try:
        t_10 = environment.filters['ms1']
    except KeyError:
        @internalcode
        def t_10(*unused):
            raise TemplateRuntimeError("No filter named 'ms1' found.")
    try:
        t_11 = environment.filters['ms_or']
    except KeyError:
        @internalcode
        def t_11(*unused):
            raise TemplateRuntimeError("No filter named 'ms_or' found.")
    try:
        t_12 = environment.filters['num']
    except KeyError:
        @internalcode
        def t_12(*unused):
            raise TemplateRuntimeError("No filter named 'num' found.")
    try:
        t_13 = environment.filters['plural']
    except KeyError:
        @internalcode
        def t_13(*unused):
            raise TemplateRuntimeError("No filter named 'plural' found.")
    try:
        t_14 = environment.filters['spread']
    except KeyError:
        @internalcode
        def t_14(*unused):
            raise TemplateRuntimeError("No filter named 'spread' found.")
    try:
        t_15 = environment.filters['string']
    except KeyError:
        @internalcode
        def t_15(*unused):
            raise TemplateRuntimeError("No filter named 'string' found.")
    try:
        t_16 = environment.filters['times']
    except KeyError:
        @internalcode
        def t_16(*unused):
            raise TemplateRuntimeError("No filter named 'times' found.")
    try:
        t_17 = environment.filters['upper']
    except KeyError:
        @internalcode
        def t_17(*unused):
            raise TemplateRuntimeError("No filter named 'upper' found.")
    try:
        t_18 = environment.filters['wrap']
    except KeyError:
        @internalcode
        def t_18(*unused):
            raise TemplateRuntimeError("No filter named 'wrap' found.")
    try:
        t_19 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_19(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    l_0_prose = context.vars['prose'] = environment.get_template('prose.txt', 'report.txt')._get_default_module(context)
    context.exported_vars.discard('prose')
    l_0_p = environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'params')
    context.vars['p'] = l_0_p
    context.exported_vars.add('p')
    l_0_s = environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'sockets')
    context.vars['s'] = l_0_s
    context.exported_vars.add('s')
    l_0_block = context.call(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'row'), 'block')
    context.vars['block'] = l_0_block
    context.exported_vars.add('block')
    def macro():
        t_20 = []
        pass
        t_20.append(
            '------------------------------------------------------------------------------',
        )
        return concat(t_20)
    context.exported_vars.add('rule')
    context.vars['rule'] = l_0_rule = Macro(environment, macro, 'rule', (), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_title, l_1_aside):
        t_21 = []
        if l_1_title is missing:
            l_1_title = undefined("parameter 'title' was not provided", name='title')
        if l_1_aside is missing:
            l_1_aside = undefined("parameter 'aside' was not provided", name='aside')
        pass
        t_21.extend((
            str(context.call((undefined(name='rule') if l_0_rule is missing else l_0_rule))),
            '\n',
            str(t_14(l_1_title, l_1_aside)),
            '\n',
            str(context.call((undefined(name='rule') if l_0_rule is missing else l_0_rule))),
        ))
        return concat(t_21)
    context.exported_vars.add('heading')
    context.vars['heading'] = l_0_heading = Macro(environment, macro, 'heading', ('title', 'aside'), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_d):
        t_22 = []
        if l_1_d is missing:
            l_1_d = undefined("parameter 'd' was not provided", name='d')
        pass
        t_22.append(
            '\n',
        )
        t_23 = []
        pass
        t_23.extend((
            'Detail for ',
            str(environment.getattr(l_1_d, 'scenario')),
            ': the ',
            str(environment.getattr(l_1_d, 'run')),
            ' run, ',
            str(environment.getattr(l_1_d, 'shown')),
            ' of its ',
            str(environment.getattr(l_1_d, 'decisions')),
            " channel decisions (t: when the producer's offer was decided; depth: tokens queued after it; waited: how long the producer was held first; read: when the reader got that token, from the log if it was replayed).",
        ))
        t_22.append(t_18(concat(t_23)))
        t_22.append(
            '\n',
        )
        t_24 = []
        pass
        t_24.append(
            'Decisions: ',
        )
        l_3_loop = missing
        for (l_3_name, l_3_meaning), l_3_loop in LoopContext(environment.getattr(l_1_d, 'legend'), undefined):
            _loop_vars = {}
            pass
            t_24.extend((
                '"',
                str(l_3_name),
                '" means ',
                str(l_3_meaning),
                str(('; ' if (not environment.getattr(l_3_loop, 'last')) else '.')),
            ))
        l_3_loop = l_3_name = l_3_meaning = missing
        t_22.append(t_18(concat(t_24)))
        t_22.append(
            '\n|     t ms  index  decision                 depth  waited ms    read ms\n',
        )
        for l_2_row in environment.getattr(l_1_d, 'rows'):
            _loop_vars = {}
            pass
            if t_19(l_2_row):
                pass
                t_22.append(
                    '|      ...\n',
                )
            else:
                pass
                t_22.extend((
                    '| ',
                    str(t_3('%8.2f %6d  %-23s %6d %10.2f %10s', environment.getattr(l_2_row, 't_ms'), environment.getattr(l_2_row, 'index'), environment.getattr(l_2_row, 'label'), environment.getattr(l_2_row, 'depth'), environment.getattr(l_2_row, 'waited_ms'), t_11(environment.getattr(l_2_row, 'read_ms'), 'never'))),
                    '\n',
                ))
        l_2_row = missing
        if (environment.getattr(l_1_d, 'section') == 4):
            pass
            t_22.append(
                '\n',
            )
            t_25 = []
            pass
            t_25.extend((
                'The reader hung up at ',
                str(t_10(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'resume'), 'hang_up_ms'))),
                ' ms, after id ',
                str(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'resume'), 'last_event_id_shown')),
                ', and reconnected at ',
                str(t_10(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'resume'), 'reconnect_ms'))),
                ' ms with ',
                str(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'resume'), 'sent_header')),
                '; the ',
                str(t_13(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'resume'), 'replayed'), 'token')),
                ' already in the log came from there, the rest through a new channel.',
            ))
            t_22.append(t_18(concat(t_25)))
        if (environment.getattr(l_1_d, 'scenario') in ('drop-newest', 'drop-oldest')):
            pass
            t_22.append(
                '\nWhat the reader got, each hole marked [n lost]:\n',
            )
            t_26 = []
            pass
            for (l_3_text, l_3_lost) in environment.getattr(context.call(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'row'), environment.getattr(l_1_d, 'scenario')), 'pieces'):
                _loop_vars = {}
                pass
                if l_3_lost:
                    pass
                    t_26.extend((
                        ' [',
                        str(l_3_lost),
                        ' lost]',
                    ))
                else:
                    pass
                    t_26.append(
                        str(l_3_text),
                    )
            l_3_text = l_3_lost = missing
            t_22.append(t_18(concat(t_26)))
        return concat(t_22)
    context.exported_vars.add('detail_block')
    context.vars['detail_block'] = l_0_detail_block = Macro(environment, macro, 'detail_block', ('d',), False, False, False, context.eval_ctx.autoescape)
    if (not (undefined(name='s') if l_0_s is missing else l_0_s)):
        pass
        yield str(t_18(context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'intro'), (undefined(name='via') if l_0_via is missing else l_0_via))))
        yield '\n'
    yield str(t_14('STREAMING, BACKPRESSURE AND RESUME', ('measured over loopback sockets' if (undefined(name='s') if l_0_s is missing else l_0_s) else 'protocol and buffers, no socket')))
    yield '\n==============================================================================\n'
    if (not (undefined(name='s') if l_0_s is missing else l_0_s)):
        pass
        yield str(t_5(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'scenario'), 'you chose'))
        yield '\n'
    yield str(t_5(str_join(("'", environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'question'), "'", )), 'question'))
    yield '\n'
    yield str(t_5(str_join((t_13(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'tokens'), 'token'), ', one SSE frame each', )), 'answer length'))
    yield '\n'
    yield str(t_5(str_join((t_13(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'buffer'), 'slot'), ' between the producer and the reader', )), 'buffer'))
    yield '\n'
    yield str(t_5(str_join((t_12(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms')), ' ms per token, against a producer that needs ', t_12(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'producer_ms')), ' ms', )), environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_label')))
    yield '\n'
    if (undefined(name='s') if l_0_s is missing else l_0_s):
        pass
        yield "clock              real: every figure below was measured just now, over TCP on\n                   127.0.0.1, by a reader in this process reading the server's\n                   sockets; it changes from one run to the next\n"
        yield str(t_5(str_join((t_2(t_8(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'connections'))), ' connections in ', t_12(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'wall_s')), ' s: baseline, block, drop-newest, a cut after ', t_13(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'cut_after'), 'token'), ', and the resume that completes it', )), 'runs'))
        yield '\n'
    else:
        pass
        yield str(t_5(str_join((environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'clock'), (str_join((' (deterministic: ', environment.getattr((undefined(name='via') if l_0_via is missing else l_0_via), 'same_input'), ')', )) if (environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'clock') == 'virtual') else ' (measured now, on the wall clock)'), )), 'clock'))
        yield '\n\n'
        t_27 = []
        pass
        if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'trimmed'):
            pass
            t_27.extend((
                'TRIMMED FOR ',
                str(t_17(environment.getattr((undefined(name='via') if l_0_via is missing else l_0_via), 'this'))),
                ": the project's own demo streams the full ",
                str(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_tokens')),
                ' token answer ',
                str(t_16(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_repeats'))),
                ' over a loopback socket with a ',
                str(t_12(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_reader_ms'))),
                ' ms reader, about ',
                str(t_12(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_estimate_s'))),
                ' seconds of wall clock. Here the answer is cut to its first ',
                str(t_13(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'tokens'), 'token')),
                ' and the reader is ',
                str(t_12(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms'))),
                ' ms per token.',
            ))
        else:
            pass
            t_27.extend((
                'FULL ANSWER: ',
                str(environment.getattr((undefined(name='via') if l_0_via is missing else l_0_via), 'this')),
                ' runs all ',
                str(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'answer_tokens')),
                " tokens, as the project's own demo does (",
                str(t_16(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_repeats'))),
                ' over a loopback socket with a ',
                str(t_12(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_reader_ms'))),
                ' ms reader); here the reader is ',
                str(t_12(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms'))),
                ' ms per token.',
            ))
        t_27.append(
            ' ',
        )
        if (environment.getattr((undefined(name='block') if l_0_block is missing else l_0_block), 'high_water') == environment.getattr((undefined(name='block') if l_0_block is missing else l_0_block), 'capacity')):
            pass
            t_27.append(
                'The buffer still fills, every policy still makes its decision, and the resume still replays from the last event id.',
            )
        else:
            pass
            t_27.append(
                'With these parameters the buffer never fills (the reader keeps up), so the policies have nothing to decide; the resume still replays from the last event id.',
            )
        t_27.append(
            '\n',
        )
        yield t_18(concat(t_27))
    if (undefined(name='s') if l_0_s is missing else l_0_s):
        pass
        yield str(context.call((undefined(name='heading') if l_0_heading is missing else l_0_heading), '1. WHAT ACTUALLY GOES DOWN THE WIRE', "as the reader's socket received it"))
        yield '\nThe first frames, exactly as bytes, each one closed by a blank line:\n'
    else:
        pass
        yield str(context.call((undefined(name='heading') if l_0_heading is missing else l_0_heading), '1. WHAT ACTUALLY GOES DOWN THE WIRE', ''))
        yield '\nA fast reader, so nothing is queued. The first frames, exactly as bytes,\neach one closed by a blank line:\n'
    for l_1_frame in environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'shown'):
        _loop_vars = {}
        pass
        yield str(t_7(context.eval_ctx, t_4(l_1_frame), '\n'))
        yield '\n'
    l_1_frame = missing
    if environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'skipped'):
        pass
        yield '| ...\n'
    yield 'And the closing frame:\n'
    yield str(t_7(context.eval_ctx, t_4(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'closing')), '\n'))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'spaced_token'):
        pass
        yield '\n'
        yield str(t_18(str_join(('Two spaces after "data:" where a token starts with one: the parser strips the first, and the token ("', environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'spaced_token'), '") keeps its own.', ))))
    yield '\n'
    yield str(t_18(str_join(("Fed back through the project's own parser: ", environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'frames_read'), ' frames read, ', environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'token_frames'), ' of them tokens', (' (NOT the tokens that were sent)' if (not environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wire'), 'round_trip')) else ''), '.', ))))
    yield '\n'
    yield str(t_18(context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'ids_matter'))))
    yield str(context.call((undefined(name='heading') if l_0_heading is missing else l_0_heading), '2. TIMING', ('a fast reader over loopback' if (undefined(name='s') if l_0_s is missing else l_0_s) else 'a fast reader, nothing in the way')))
    yield '\n'
    yield str(t_5(str_join((t_9(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'ttft_ms')), ' ms', )), 'time to first token', 35))
    yield '\n'
    yield str(t_5(str_join((t_9(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'total_ms')), ' ms', )), 'whole answer', 35))
    yield '\n'
    yield str(t_5(str_join((environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'first_token_percent'), ' percent', )), 'share waiting for the first token', 35))
    yield '\n'
    yield str(t_5((str_join(('p50 ', t_9(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'itl_p50_ms')), ' ms, p95 ', t_9(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'itl_p95_ms')), ' ms, worst ', t_9(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'itl_max_ms')), ' ms', )) if (not t_19(environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'itl_p50_ms'))) else 'none: a single token has no gap'), 'between tokens', 35))
    yield '\n'
    yield str(t_5(str_join((environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'timing'), 'tokens_per_s'), ' tokens per second', )), 'throughput', 35))
    yield '\n'
    if (undefined(name='s') if l_0_s is missing else l_0_s):
        pass
        yield "\nTimes are from the reader's request to each token it took, on the server's\nclock; TTFT includes the TCP connect and the request.\n"
    yield '\n'
    yield str(t_18(context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'timing_why'))))
    if (environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail') and (environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail'), 'section') == 2)):
        pass
        yield str(context.call((undefined(name='detail_block') if l_0_detail_block is missing else l_0_detail_block), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail')))
    yield str(context.call((undefined(name='heading') if l_0_heading is missing else l_0_heading), '3. THE BUFFER UNDER A SLOW READER', str_join((t_13(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'buffer'), 'slot'), ', ', t_12(environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'reader_ms')), ' ms per token', ))))
    yield '\n'
    l_0_columns = '%-11s%11s%9s%10s%12s%17s%8s'
    context.vars['columns'] = l_0_columns
    context.exported_vars.add('columns')
    yield str(t_3((undefined(name='columns') if l_0_columns is missing else l_0_columns), 'policy', 'delivered', 'dropped', 'gap runs', 'high water', 'producer waited', 'wall ms'))
    yield '\n'
    yield str(context.call((undefined(name='rule') if l_0_rule is missing else l_0_rule)))
    yield '\n'
    for l_1_row in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'buffer'):
        _loop_vars = {}
        pass
        yield str(t_3('%-11s%11s%9d%10d%12s%17s%8.1f', environment.getattr(l_1_row, 'policy'), str_join((environment.getattr(l_1_row, 'delivered'), ' of ', environment.getattr(l_1_row, 'total'), )), environment.getattr(l_1_row, 'dropped'), environment.getattr(l_1_row, 'gap_runs'), str_join((environment.getattr(l_1_row, 'high_water'), ' of ', environment.getattr(l_1_row, 'capacity'), )), str_join((t_10(environment.getattr(l_1_row, 'producer_waited_ms')), ' ms', )), environment.getattr(l_1_row, 'wall_ms')))
        yield '\n'
    l_1_row = missing
    for l_1_row in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'buffer'):
        _loop_vars = {}
        pass
        yield '\n'
        t_28 = []
        pass
        if (environment.getattr(l_1_row, 'policy') == 'block'):
            pass
            t_28.extend((
                'Under block the reader got all ',
                str(t_13(environment.getattr(l_1_row, 'delivered'), 'token')),
                ' in ',
                str(t_10(environment.getattr(l_1_row, 'wall_ms'))),
                ' ms; ',
            ))
            if environment.getattr(l_1_row, 'pauses'):
                pass
                t_28.extend((
                    'the producer waited ',
                    str(t_10(environment.getattr(l_1_row, 'producer_waited_ms'))),
                    ' ms across ',
                    str(t_13(environment.getattr(l_1_row, 'pauses'), 'pause')),
                    '.',
                ))
            else:
                pass
                t_28.append(
                    'the producer never had to wait.',
                )
        elif environment.getattr(l_1_row, 'dropped'):
            pass
            t_28.extend((
                'Under ',
                str(environment.getattr(l_1_row, 'policy')),
                ' the run finished in ',
                str(t_10(environment.getattr(l_1_row, 'wall_ms'))),
                ' ms and lost ',
                str(t_13(environment.getattr(l_1_row, 'dropped'), 'token')),
                ' in ',
                str(t_13(environment.getattr(l_1_row, 'gap_runs'), 'run')),
                ': ',
            ))
            if (environment.getattr(l_1_row, 'policy') == 'drop-newest'):
                pass
                t_28.append(
                    'a full buffer turned each new token away.',
                )
            else:
                pass
                t_28.append(
                    'a full buffer evicted its oldest token, so the reader ends on the newest ones.',
                )
        elif environment.getattr(l_1_row, 'cuts'):
            pass
            t_28.extend((
                'Under disconnect the reader was cut off ',
                str(t_16(environment.getattr(l_1_row, 'cuts'))),
                ' when the buffer filled; it came back ',
                str(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'retry_ms')),
                ' ms after each cut (the retry its open frame set) and resumed from the log: ',
                str(environment.getattr(l_1_row, 'delivered')),
                ' of ',
                str(t_13(environment.getattr(l_1_row, 'total'), 'token')),
                ', none lost, in ',
                str(t_10(environment.getattr(l_1_row, 'wall_ms'))),
                " ms against block's ",
                str(t_10(environment.getattr((undefined(name='block') if l_0_block is missing else l_0_block), 'wall_ms'))),
                ' ms. Its cost is wall time, not tokens.\n',
            ))
        else:
            pass
            t_28.extend((
                'Under ',
                str(environment.getattr(l_1_row, 'policy')),
                ' the run finished in ',
                str(t_10(environment.getattr(l_1_row, 'wall_ms'))),
                ' ms and ',
            ))
            if (environment.getattr(l_1_row, 'policy') == 'disconnect'):
                pass
                t_28.append(
                    'never cut the reader off',
                )
            else:
                pass
                t_28.append(
                    'lost nothing',
                )
            t_28.append(
                ': the buffer never overflowed.\n',
            )
        yield t_18(concat(t_28))
    l_1_row = missing
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'same_loss'):
        pass
        yield '\n'
        l_0_drop = context.call(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'row'), 'drop-newest')
        context.vars['drop'] = l_0_drop
        context.exported_vars.add('drop')
        yield str(t_18(str_join(('Drop-newest and drop-oldest both lose ', t_13(environment.getattr((undefined(name='drop') if l_0_drop is missing else l_0_drop), 'dropped'), 'token'), " here: the reader takes a token at the same instants under both, so each offer to a full buffer costs one token either way. Drop-newest keeps what was queued and turns the new token away; drop-oldest keeps the new token and evicts the oldest queued one, so its reader ends on the answer's last tokens.", ))))
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'absent_policies'):
        pass
        l_0_one = (t_8(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'absent_policies')) == 1)
        context.vars['one'] = l_0_one
        context.exported_vars.add('one')
        yield '\n'
        yield str(t_18(str_join((t_1(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'absent_policies')), ' ', ('is' if (undefined(name='one') if l_0_one is missing else l_0_one) else 'are'), ' not run ', (str_join(('over sockets by the demo; the page shows ', ('it' if (undefined(name='one') if l_0_one is missing else l_0_one) else 'them'), ' in memory', )) if (undefined(name='s') if l_0_s is missing else l_0_s) else 'in this report'), '.', ))))
    yield '\n'
    yield str(t_18(context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'buffer_why'))))
    if (not (undefined(name='s') if l_0_s is missing else l_0_s)):
        pass
        yield '\n'
        yield str(t_18(context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'second_queue'), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'demo_buffer'), (undefined(name='via') if l_0_via is missing else l_0_via))))
    if (environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail') and (environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail'), 'section') == 3)):
        pass
        yield str(context.call((undefined(name='detail_block') if l_0_detail_block is missing else l_0_detail_block), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail')))
    l_0_c = environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'resume')
    context.vars['c'] = l_0_c
    context.exported_vars.add('c')
    yield str(context.call((undefined(name='heading') if l_0_heading is missing else l_0_heading), '4. DISCONNECT AND RESUME', str_join(('the connection dies after ', t_13(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'first_tokens'), 'token'), ))))
    yield '\n'
    yield str(t_5(str_join((t_13(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'first_tokens'), 'token'), ', last event id ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'last_event_id_shown'), ', completed=', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'first_completed'), )), 'first connection'))
    yield '\n'
    if (undefined(name='s') if l_0_s is missing else l_0_s):
        pass
        yield str(t_5((str_join(('the reader had taken ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'first_tokens'), ', the server had sent ', environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'sent_when_noticed'), ' and generated ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect'), ' when a failed write told it the reader was gone; it cancelled the producer there instead of generating all ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total'), ' into a dead connection', )) if (environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect') < environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total')) else str_join(('the server had generated all ', t_13(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total'), 'token'), ' before it noticed the reader was gone', ))), 'producer stopped'))
        yield '\n'
    elif (environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect') < environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total')):
        pass
        yield str(t_5(str_join(('the server generated ', t_13(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect'), 'token'), ' then saw the cancel and stopped, instead of generating all ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total'), ' into a dead connection', )), 'producer stopped'))
        yield '\n'
    else:
        pass
        yield str(t_5(str_join(('the server had generated all ', t_13(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total'), 'token'), ' before the reader left, so the cancel had nothing left to stop', )), 'producer finished'))
        yield '\n'
    yield str(t_5(str_join((environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'sent_header'), (str_join((', ', environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'retry_ms'), ' ms later (the retry the open frame set)', )) if (undefined(name='s') if l_0_s is missing else l_0_s) else ''), )), 'reconnect sends'))
    yield '\n'
    yield str(t_5(str_join(('resumed at index ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'resumed_at'), ', ', t_13(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'second_tokens'), 'more token'), (str_join((' (', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'replayed'), ' of them replayed from the log)', )) if (undefined(name='s') if l_0_s is missing else l_0_s) else ''), ', completed=', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'completed'), )), 'second connection'))
    yield '\n'
    yield str(t_5(str_join((t_6(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'ids_head')), ' ... ', t_6(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'ids_tail')), )), 'event ids received'))
    yield '\n'
    yield str(t_5(t_15(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'contiguous')), str_join(('contiguous 0..', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'last_index'), ))))
    yield '\n'
    yield str(t_5((t_6(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'duplicates')) if environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'duplicates') else 'none'), 'duplicated ids'))
    yield '\n'
    yield str(t_5(t_15(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'text_matches')), 'text matches a stream that was never interrupted', 50))
    yield '\n'
    yield str(t_5(str_join((environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_total'), ' over both connections', (", the answer's length: nothing was generated twice" if environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_once') else ': SOME INDEX WAS GENERATED TWICE'), )), 'model steps'))
    yield '\n'
    l_0_d = environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detach')
    context.vars['d'] = l_0_d
    context.exported_vars.add('d')
    if (undefined(name='d') if l_0_d is missing else l_0_d):
        pass
        yield '\nWhat each choice of on_disconnect cost, measured:\n'
        yield str(t_5(str_join(('the producer generated ', t_13(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect'), 'token'), ', ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'replayed'), ' past what the reader had, then stopped; the reconnect replayed those from the log, ', (str_join(('restarted the model at index ', environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect'), ' and ', )) if (environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'generated_at_reconnect') < environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'total')) else ''), 'waited ', t_10(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'waited_for_model_ms')), ' ms for the model (', t_13(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'second_tokens'), 'token'), ' in ', t_10(environment.getattr((undefined(name='c') if l_0_c is missing else l_0_c), 'catch_up_ms')), ' ms)', )), 'cancel', 9))
        yield '\n'
        yield str(t_5(str_join(('the producer kept going: ', t_13(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'generated_while_away'), 'token'), ' generated while nobody was reading; the reconnect found ', environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'generated_at_reconnect'), " in the log and caught up at the reader's pace, ", t_13(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'second_tokens'), 'token'), ' in ', t_10(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'catch_up_ms')), ' ms, ', t_10(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'waited_for_model_ms')), ' ms of it waiting for the model', )), 'detach', 9))
        yield '\n'
        yield str(t_5(str_join(('contiguous ', environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'contiguous'), ', duplicated ids ', (t_6(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'duplicates')) if environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'duplicates') else 'none'), ', text matches ', environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'text_matches'), ', ', t_13(environment.getattr((undefined(name='d') if l_0_d is missing else l_0_d), 'generated_total'), 'model step'), )), '', 9))
        yield '\n'
    yield '\n'
    yield str(t_18(context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'resume_why'))))
    if (environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail') and (environment.getattr(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail'), 'section') == 4)):
        pass
        yield str(context.call((undefined(name='detail_block') if l_0_detail_block is missing else l_0_detail_block), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'detail')))
    if (undefined(name='s') if l_0_s is missing else l_0_s):
        pass
        yield str(context.call((undefined(name='heading') if l_0_heading is missing else l_0_heading), '5. WHERE THE SLOWNESS WENT', "the kernel's buffers, sampled per token"))
        yield '\nconnection    channel      in kernel, most     server send    reader recv   reader\n              high water   tokens     bytes    (TIOCOUTQ)     (FIONREAD)    held\n'
        yield str(context.call((undefined(name='rule') if l_0_rule is missing else l_0_rule)))
        yield '\n'
        for (l_1_name, l_1_k) in context.call(environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'connections'), 'items')):
            _loop_vars = {}
            pass
            yield str(t_3('%-13s %10s %9d %9d %13d %14d %8d', l_1_name, str_join((environment.getattr(l_1_k, 'channel_high_water'), ' of ', environment.getattr(l_1_k, 'channel_capacity'), )), environment.getattr(l_1_k, 'in_kernel_tokens_max'), environment.getattr(l_1_k, 'in_kernel_bytes_max'), environment.getattr(l_1_k, 'send_queue_max'), environment.getattr(l_1_k, 'recv_queue_max'), environment.getattr(l_1_k, 'reader_held_max')))
            yield '\n'
        l_1_name = l_1_k = missing
        l_0_g = environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'granted')
        context.vars['g'] = l_0_g
        context.exported_vars.add('g')
        t_29 = []
        pass
        if (environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'sndbuf_asked') and environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'rcvbuf_asked')):
            pass
            t_29.extend((
                'Asked for SO_SNDBUF ',
                str(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'sndbuf_asked')),
                " bytes on the server's sockets and SO_RCVBUF ",
                str(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'rcvbuf_asked')),
                " on the reader's; the kernel granted ",
                str(environment.getattr((undefined(name='g') if l_0_g is missing else l_0_g), 'sndbuf')),
                ' and ',
                str(environment.getattr((undefined(name='g') if l_0_g is missing else l_0_g), 'rcvbuf')),
            ))
        else:
            pass
            t_29.extend((
                "The kernel's own buffer sizes: SO_SNDBUF ",
                str(environment.getattr((undefined(name='g') if l_0_g is missing else l_0_g), 'sndbuf')),
                ', SO_RCVBUF ',
                str(environment.getattr((undefined(name='g') if l_0_g is missing else l_0_g), 'rcvbuf')),
            ))
        t_29.extend((
            '. The reader recv()s at most ',
            str(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'recv_chunk')),
            ' bytes at a time, so what it has not taken stays in the kernel; "in kernel" is what the server had handed to sendall() and the reader had not yet read, in bytes and in whole token frames; the two queue columns are the deepest each side\'s queue was at the same instants.\n',
        ))
        yield t_18(concat(t_29))
        yield '\n'
        yield str(t_18(context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'kernel_corrects'), (undefined(name='r') if l_0_r is missing else l_0_r), (undefined(name='s') if l_0_s is missing else l_0_s))))
    yield str(context.call((undefined(name='rule') if l_0_rule is missing else l_0_rule)))
    yield '\n'
    yield str(t_18(context.call(environment.getattr((undefined(name='prose') if l_0_prose is missing else l_0_prose), 'closing'), environment.getattr((undefined(name='p') if l_0_p is missing else l_0_p), 'clock'), environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'transport'), (undefined(name='via') if l_0_via is missing else l_0_via))))

blocks = {}
debug_info = '1=131&2=133&3=136&4=139&5=142&6=151&7=159&8=161&9=163&10=168&12=180&14=199&17=214&18=217&21=226&24=230&26=239&28=251&31=258&34=278&35=280&37=282&39=284&40=286&42=288&43=290&44=292&45=294&46=296&48=299&50=303&53=307&52=357&57=358&58=360&61=364&65=366&66=369&68=372&72=376&73=378&75=381&77=383&78=385&79=388&80=390&81=392&82=394&83=396&84=398&88=402&89=406&90=408&91=411&92=413&93=415&94=418&96=421&99=427&100=431&101=450&102=454&103=473&104=477&106=494&98=512&110=514&112=517&113=520&114=521&115=523&117=527&119=529&121=533&122=537&123=540&124=542&125=544&126=546&127=548&128=550&130=554&132=556&133=558&134=560&135=562&136=564&137=566&138=568&139=570&140=573&143=576&144=578&145=580&148=583&149=587&150=589&153=591&154=593&155=596&157=599&159=604&158=629&162=631&163=632&164=634'