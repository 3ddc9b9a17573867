package cluster

// SyncActor is the name of each member's actor that takes the other
// members' messages.
const SyncActor = syncActor
