// Package config loads switchyard-agent's configuration: a YAML file,
// overridden by SWITCHYARD_* environment variables, overridden by flags
// (viper). Load refuses a bad config listing every problem with the key
// that caused it. Where to start: Load and Config.
package config
