"""Running responses: the Run and its followers, stored events and re-streams, records, replicas and leases."""
