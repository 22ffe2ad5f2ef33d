module switchyard.dev/switchyard/sdk

go 1.26.0
