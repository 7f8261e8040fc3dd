package notify

// ListenWithDelays is Listen with an outage's first reconnect delay and the cap given: the tests
// shrink them to milliseconds.
var ListenWithDelays = listen
