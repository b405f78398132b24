"""The application: the command line, what each command writes, terminal reports, figures
and the demo.
"""
