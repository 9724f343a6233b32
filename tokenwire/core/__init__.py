"""The sans-IO core: SSE codec, channel, clocks, processes, token log, metrics.

Nothing in here opens a socket or speaks HTTP; the drivers that do live at
the edges of the package.
"""
