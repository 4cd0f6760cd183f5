"""The namespaces the farm keeps for itself on every cluster, emulated or real: its observability
stack (named as SREGym deploys it, so an agent trained there finds the same services) and Chaos
Mesh. Neither is ever the agent's, and a reset never deletes them."""

STACK_NAMESPACE = "observe"
CHAOS_NAMESPACE = "chaos-mesh"
