// Package ofxlate translates resolved SDK flows, groups and meters (package
// pipeline / flowstore) into OpenFlow 1.5 messages of package
// host/openflow. It is the only place that knows both models; the mapping
// is one switch per kind, so adding a match field or action means adding a
// case here and a golden test beside it.
package ofxlate
