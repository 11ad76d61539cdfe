"""The dream worker: refines long-term memory while the agent is idle."""
