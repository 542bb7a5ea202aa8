"""Declarative construct schemas for every on-disk layout of a RocketMQ broker store.

No I/O here: each module opens with a box diagram of its layout and the RocketMQ
source file it mirrors. Installed as ``rmqtool.formats``. The fast read paths in
``rmqtool.store`` derive their ``struct`` formats from these schemas
(:func:`rmqtool.formats.derive.struct_of`), so each layout is declared once.
"""
