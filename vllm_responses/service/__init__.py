"""The responses service: a request made a plan and run; admission, the run's driver, lifecycle, conversations."""
