from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'prose.txt'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_intro = l_0_ids_matter = l_0_timing_why = l_0_buffer_why = l_0_second_queue = l_0_resume_why = l_0_kernel_corrects = l_0_closing = missing
    try:
        t_1 = environment.filters['plural']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'plural' found.")
    pass
    def macro(l_1_via):
        t_2 = []
        if l_1_via is missing:
            l_1_via = undefined("parameter 'via' was not provided", name='via')
        pass
        t_2.extend((
            'See what a token stream really sends, what happens when the reader is too slow, and how a dropped connection picks up where it left off.\nWhen an assistant types its answer out word by word, there is a small protocol underneath doing the work. ',
            str(environment.getattr(l_1_via, 'This')),
            ' shows you that protocol: the exact text frames that go down the wire, how long the first word took to arrive, and how evenly the rest followed.\nThen it shows the awkward part. The model produces words faster than a slow reader can take them, so something has to hold the difference. The buffer here is deliberately small, and you choose what it does when it fills up: make the model wait, which keeps every word but slows everything down; throw words away, which stays fast but leaves holes in the answer; or cut the reader off and let it come back for the rest, which keeps every word but costs a reconnect. You see each, with its cost measured.\nLast, it kills the connection partway through and reconnects. The reader tells the server the id of the last word it actually received, and the server carries on from the next one, so the answer arrives complete with nothing repeated.\n',
        ))
        if environment.getattr(l_1_via, 'command'):
            pass
            t_2.append(
                'One honest note: this report shows the protocol and the buffer behaviour, not a live open connection. The command runs the frames, the timings and the buffer decisions in memory and prints them. Everything you see is real code doing the real thing, just not across a socket: tokenwire serve streams the same answer over one, and tokenwire demo measures it there.\n',
            )
        elif environment.getattr(l_1_via, 'served_live'):
            pass
            t_2.append(
                'One honest note: the figures on this page are produced in memory, not across a socket. Everything you see is real code doing the real thing, and this server can also hold a stream open: its live page streams the same answer over a real socket, so you can watch it arrive, get cut and resume.\n',
            )
        else:
            pass
            t_2.append(
                'One honest note: this page shows the protocol and the buffer behaviour, not a live open connection. The server this runs on is a serverless function that cannot hold a stream open, so the frames, the timings and the buffer decisions are produced in memory and printed. Everything you see is real code doing the real thing, just not across a socket.\n',
            )
        return concat(t_2)
    context.exported_vars.add('intro')
    context.vars['intro'] = l_0_intro = Macro(environment, macro, 'intro', ('via',), False, False, False, context.eval_ctx.autoescape)
    def macro():
        t_3 = []
        pass
        t_3.append(
            'The id on each frame is the token index. That is the only reason a resume can work: the reader can name exactly how far it got.\n',
        )
        return concat(t_3)
    context.exported_vars.add('ids_matter')
    context.vars['ids_matter'] = l_0_ids_matter = Macro(environment, macro, 'ids_matter', (), False, False, False, context.eval_ctx.autoescape)
    def macro():
        t_4 = []
        pass
        t_4.append(
            'Time to first token is the number a reader can feel. An answer that takes four seconds but starts printing in 200 ms reads as fast; one that arrives all at once after two seconds of a spinner reads as slow.\nThe 95th percentile (p95) is tracked separately from the average because one 900 ms stall in the middle of an otherwise smooth stream is what makes a stream look broken. Percentiles interpolate linearly between ranks, as numpy does by default.\n',
        )
        return concat(t_4)
    context.exported_vars.add('timing_why')
    context.vars['timing_why'] = l_0_timing_why = Macro(environment, macro, 'timing_why', (), False, False, False, context.eval_ctx.autoescape)
    def macro():
        t_5 = []
        pass
        t_5.append(
            "None of them is free. An unbounded queue looks like block with no wait and no loss, right up to the point where one slow reader per stream turns the difference in speed into resident memory and the process is killed.\nFor an answer someone is reading, block is right. Drop-newest and drop-oldest are only right when the payload is refreshable state, a progress percentage or a preview. Disconnect is right when the reader can resume from a log, as a hub's subscribers do.\n",
        )
        return concat(t_5)
    context.exported_vars.add('buffer_why')
    context.vars['buffer_why'] = l_0_buffer_why = Macro(environment, macro, 'buffer_why', (), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_demo_buffer, l_1_via):
        t_6 = []
        if l_1_demo_buffer is missing:
            l_1_demo_buffer = undefined("parameter 'demo_buffer' was not provided", name='demo_buffer')
        if l_1_via is missing:
            l_1_via = undefined("parameter 'via' was not provided", name='via')
        pass
        t_6.extend((
            "Over TCP the kernel's socket buffers are a second, hidden queue: tokenwire demo measured tens of tokens waiting in them while its ",
            str(l_1_demo_buffer),
            '-slot channel was full, so on a real socket the server feels a slow reader late. ',
            str(environment.getattr(l_1_via, 'This')),
            ' runs in memory, where the channel is the only queue, so its figures stand.\n',
        ))
        return concat(t_6)
    context.exported_vars.add('second_queue')
    context.vars['second_queue'] = l_0_second_queue = Macro(environment, macro, 'second_queue', ('demo_buffer', 'via'), False, False, False, context.eval_ctx.autoescape)
    def macro():
        t_7 = []
        pass
        t_7.append(
            'The resume is served out of the logged tokens, so the model is not run a second time. Re-running it would bill the caller twice, and at any temperature above zero the continuation would not match what the reader already has on screen.\n',
        )
        return concat(t_7)
    context.exported_vars.add('resume_why')
    context.vars['resume_why'] = l_0_resume_why = Macro(environment, macro, 'resume_why', (), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_r, l_1_s):
        t_8 = []
        l_1_block = l_1_drop = l_1_c = l_1_mem = l_1_k = missing
        if l_1_r is missing:
            l_1_r = undefined("parameter 'r' was not provided", name='r')
        if l_1_s is missing:
            l_1_s = undefined("parameter 's' was not provided", name='s')
        pass
        (l_1_block, l_1_drop, l_1_c, l_1_mem, l_1_k) = (context.call(environment.getattr(l_1_r, 'row'), 'block'), context.call(environment.getattr(l_1_r, 'row'), 'drop-newest'), environment.getattr(l_1_r, 'resume'), environment.getattr(l_1_s, 'in_memory'), environment.getitem(environment.getattr(l_1_s, 'connections'), 'block'))
        t_8.extend((
            'What this corrects on the page. The page says the buffer between the producer and the reader has ',
            str(t_1(environment.getattr((undefined(name='block') if l_1_block is missing else l_1_block), 'capacity'), 'slot')),
            " and that a slow reader fills it. Over TCP it is not the only queue: while the block run's channel held at most ",
            str(t_1(environment.getattr((undefined(name='block') if l_1_block is missing else l_1_block), 'high_water'), 'token')),
            ', the kernel held up to ',
            str(environment.getattr((undefined(name='k') if l_1_k is missing else l_1_k), 'in_kernel_tokens_max')),
            ' more (',
            str(environment.getattr((undefined(name='k') if l_1_k is missing else l_1_k), 'in_kernel_bytes_max')),
            ' bytes), and the producer is held back only when both are full. So the server feels a slow reader late',
        ))
        if (environment.getattr((undefined(name='drop') if l_1_drop is missing else l_1_drop), 'delivered') > environment.getattr((undefined(name='mem') if l_1_mem is missing else l_1_mem), 'drop_delivered')):
            pass
            t_8.extend((
                ', and a policy decides less: drop-newest delivered ',
                str(environment.getattr((undefined(name='drop') if l_1_drop is missing else l_1_drop), 'delivered')),
                ' of ',
                str(environment.getattr((undefined(name='drop') if l_1_drop is missing else l_1_drop), 'total')),
                ' here against ',
                str(environment.getattr((undefined(name='mem') if l_1_mem is missing else l_1_mem), 'drop_delivered')),
                ' in memory with the same ',
                str(t_1(environment.getattr((undefined(name='drop') if l_1_drop is missing else l_1_drop), 'capacity'), 'slot')),
                ', because the tokens parked in the kernel were not dropped.',
            ))
        else:
            pass
            t_8.extend((
                '; drop-newest still delivered ',
                str(environment.getattr((undefined(name='drop') if l_1_drop is missing else l_1_drop), 'delivered')),
                ' of ',
                str(environment.getattr((undefined(name='drop') if l_1_drop is missing else l_1_drop), 'total')),
                ' here against ',
                str(environment.getattr((undefined(name='mem') if l_1_mem is missing else l_1_mem), 'drop_delivered')),
                ' in memory.',
            ))
        t_8.extend((
            ' When the reader hung up after ',
            str(t_1(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'first_tokens'), 'token')),
            ', the server had already sent ',
            str(environment.getattr(l_1_s, 'sent_when_noticed')),
            ' and generated ',
            str(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'generated_at_reconnect')),
            ' (in memory: ',
            str(environment.getattr((undefined(name='mem') if l_1_mem is missing else l_1_mem), 'generated_at_reconnect')),
            '): it only learns a reader is gone when a write fails, and everything in flight was generated for nobody. None of it was lost: the log kept it and the resume replayed ',
            str(t_1(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'replayed'), 'token')),
            ' from there.\n',
        ))
        if (environment.getattr(l_1_s, 'kernel_defaults') and (environment.getattr(l_1_s, 'answer_bytes') < environment.getitem(environment.getattr(l_1_s, 'kernel_defaults'), 0))):
            pass
            t_8.extend((
                "These runs shrank the buffers on purpose. This machine's default receive buffer alone (tcp_rmem ",
                str(environment.getitem(environment.getattr(l_1_s, 'kernel_defaults'), 0)),
                ' bytes to start, grown by autotuning; tcp_wmem ',
                str(environment.getitem(environment.getattr(l_1_s, 'kernel_defaults'), 1)),
                ' for sending) is larger than the whole ',
                str(environment.getattr(l_1_s, 'answer_bytes')),
                "-byte answer, so with the defaults the kernel can take all of it: the server would not feel a reader this slow at all, and block and drop would have nothing to decide. Only a longer stream, or a reader that stops reading, reaches the application's buffer.\n",
            ))
        return concat(t_8)
    context.exported_vars.add('kernel_corrects')
    context.vars['kernel_corrects'] = l_0_kernel_corrects = Macro(environment, macro, 'kernel_corrects', ('r', 's'), False, False, False, context.eval_ctx.autoescape)
    def macro(l_1_clock, l_1_transport, l_1_via):
        t_9 = []
        if l_1_clock is missing:
            l_1_clock = undefined("parameter 'clock' was not provided", name='clock')
        if l_1_transport is missing:
            l_1_transport = undefined("parameter 'transport' was not provided", name='transport')
        if l_1_via is missing:
            l_1_via = undefined("parameter 'via' was not provided", name='via')
        pass
        if (l_1_transport == 'sockets'):
            pass
            t_9.append(
                "Everything above crossed a real socket: tokenwire serve's server on 127.0.0.1, one asyncio event loop on one thread stepping every connection, its stream's writer and the producer alike, and a reader on raw sockets decoding with the project's parser. The frames, the channel and the resume are the same code the page runs in memory.\n",
            )
        else:
            pass
            t_9.append(
                "Nothing above opened a connection. The SSE frames were built by the project's own formatter and read back by its own parser, the buffer is the project's BoundedChannel, and the producer is the project's own process, cancellation check included. ",
            )
            if environment.getattr(l_1_via, 'command'):
                pass
                t_9.append(
                    'The command shows the protocol rather than performing it; tokenwire serve performs it on a real socket.',
                )
            elif environment.getattr(l_1_via, 'served_live'):
                pass
                t_9.append(
                    'This server performs it too: the live page streams the same answer over a real socket.',
                )
            else:
                pass
                t_9.append(
                    'A serverless function cannot hold a stream open, so the protocol is shown rather than performed; tokenwire serve performs it on a real socket.',
                )
            t_9.append(
                '\n',
            )
            if (l_1_clock == 'virtual'):
                pass
                t_9.extend((
                    'The clock is virtual: every figure above comes from the virtual clock (integer nanoseconds, one thread, deterministic), so ',
                    str(environment.getattr(l_1_via, 'same_input')),
                    '. ',
                ))
                if environment.getattr(l_1_via, 'command'):
                    pass
                    t_9.extend((
                        'Run the command with ',
                        str(context.call(environment.getattr(l_1_via, 'setting'), 'clock', 'real')),
                        ' to measure it now on the real clock.',
                    ))
                else:
                    pass
                    t_9.extend((
                        'Add ',
                        str(context.call(environment.getattr(l_1_via, 'setting'), 'clock', 'real')),
                        ' to measure it now on the real clock.',
                    ))
                t_9.append(
                    '\n',
                )
            else:
                pass
                t_9.extend((
                    'The clock is real: every figure above was measured just now against the wall clock, so it changes from one ',
                    str(('run' if environment.getattr(l_1_via, 'command') else 'load')),
                    ' to the next; ',
                    str(context.call(environment.getattr(l_1_via, 'setting'), 'clock', 'virtual')),
                    ' gives the deterministic ',
                    str(('report' if environment.getattr(l_1_via, 'command') else 'page')),
                    '.\n',
                ))
        return concat(t_9)
    context.exported_vars.add('closing')
    context.vars['closing'] = l_0_closing = Macro(environment, macro, 'closing', ('clock', 'transport', 'via'), False, False, False, context.eval_ctx.autoescape)

blocks = {}
debug_info = '2=18&4=25&7=28&9=33&15=46&18=55&22=64&26=73&27=82&29=90&32=99&33=107&34=110&35=156&36=160&39=170&40=179&43=189&45=207&46=211&49=235'