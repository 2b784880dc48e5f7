"""What the tests share: commands, clients, servers, workers and fixtures' helpers.

Test modules import from here (and get fixtures from conftest.py); no test module imports
another.
"""
