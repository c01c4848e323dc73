"""`python -m offline.plan`: the cyclic collector is off from the first import, since the run allocates a few
hundred thousand long-lived objects (the SDK modules, every Output) and frees little; the process ends once
every file is written and the streams are flushed (``exit_without_teardown``). `pulumi up` runs none of this."""

import gc

gc.disable()

from offline.plan.command import exit_without_teardown, main  # noqa: E402  (after the collector is off)

exit_without_teardown(main())
