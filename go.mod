module github.com/rotorhq/rotor

go 1.26.8

require go.yaml.in/yaml/v3 v3.0.4

require (
	github.com/kr/pretty v0.3.1 // indirect
	gopkg.in/check.v1 v1.0.0-20190902080502-41f04d3bba15 // indirect
)
