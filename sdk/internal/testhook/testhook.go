// Package testhook lets sdk/sdktest reach the plugin side of the wire that
// package sdk builds, without making it part of the public API.
package testhook

import (
	"log/slog"

	"switchyard.dev/switchyard/sdk/internal/wire"
)

// FeaturePlugin is set by package sdk: it returns the go-plugin plugin that
// serves feature f (an sdk.Feature) with logger.
var FeaturePlugin func(f any, logger *slog.Logger) *wire.FeaturePlugin
