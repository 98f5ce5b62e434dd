module example.com/ace-go-platform

go 1.19

require github.com/golang-jwt/jwt/v4 v4.4.3
