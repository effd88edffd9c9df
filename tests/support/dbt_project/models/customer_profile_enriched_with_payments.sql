select customer_id, payment_method from {{ ref('stg_customers') }}
