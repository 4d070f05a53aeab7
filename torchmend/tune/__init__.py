"""`torchmend tune`: the script timed as eager and under each compile setting, interleaved with fresh caches
(runs.py), one row per setting with its break-even step count and a recommendation (verdict.py), and the report
with its plot (report.py, plot.py). The settings and how the child applies them: settings.py."""
